//! The one difference from foo-deployment: the image its Deployments run.

fn main() {
    println!("cargo:rustc-env=FOO_DEPLOYMENT_IMAGE=nginx:1.27");
}
