//! Kinds: which API group, version and kind a Rust type stands for.

pub use wasmloop_contract::gvk::{Gvk, split_api_version};

/// A Rust type that stands for one Kubernetes kind.
///
/// Every k8s-openapi type implements it already. For a CRD, implement it on your serde
/// struct:
///
/// ```
/// # use wasmloop_sdk::Kind;
/// #[derive(serde::Deserialize)]
/// struct Foo { /* ... */ }
///
/// impl Kind for Foo {
///     const API_VERSION: &'static str = "samplecontroller.k8s.io/v1alpha1";
///     const KIND: &'static str = "Foo";
/// }
/// assert_eq!(Foo::gvk().group, "samplecontroller.k8s.io");
/// ```
pub trait Kind {
    /// `apiVersion`, for example `apps/v1`.
    const API_VERSION: &'static str;
    /// `kind`, for example `Deployment`.
    const KIND: &'static str;

    /// The kind as a [`Gvk`].
    fn gvk() -> Gvk {
        Gvk::from_api_version(Self::API_VERSION, Self::KIND)
    }
}

impl<T: k8s_openapi::Resource> Kind for T {
    const API_VERSION: &'static str = T::API_VERSION;
    const KIND: &'static str = T::KIND;
}
