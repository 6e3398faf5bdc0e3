//! `wasmloop dev --dry-run`: what each reconcile would write, printed as YAML diffs against
//! the cluster, computed by the API server itself (`dryRun=All`), so defaulting, admission
//! and server-side apply's merge are all in the picture.

use std::io::Write;
use std::sync::Arc;

use serde_json::Value;
use similar::TextDiff;
use wasmloop_runtime::executor::{DryRunReport, DryRunSink};

fn yaml(value: Option<&Value>) -> String {
    value.map(|v| serde_saphyr::to_string(v).unwrap_or_default()).unwrap_or_default()
}

/// Renders one report: a header line, then a unified diff (or the note, for Events and
/// finalizers).
pub fn render(report: &DryRunReport) -> String {
    let mut out = format!("# dry run: plugin {} would {} {}\n", report.plugin, report.verb, report.target);
    if let Some(note) = &report.note {
        out.push_str(&format!("#   {note}\n"));
    }
    if report.before.is_some() || report.after.is_some() {
        let (before, after) = (yaml(report.before.as_ref()), yaml(report.after.as_ref()));
        if before == after {
            out.push_str("#   no change\n");
        } else {
            let (from, to) = (
                if report.before.is_some() { "live" } else { "/dev/null (does not exist)" },
                if report.after.is_some() { "after" } else { "/dev/null (deleted)" },
            );
            out.push_str(
                &TextDiff::from_lines(&before, &after).unified_diff().context_radius(3).header(from, to).to_string(),
            );
        }
    }
    out
}

/// A sink that prints every report on stdout, one block at a time.
pub fn to_stdout() -> DryRunSink {
    Arc::new(|report: DryRunReport| {
        let text = render(&report);
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn report(before: Option<Value>, after: Option<Value>) -> DryRunReport {
        DryRunReport {
            plugin: "p".into(),
            verb: "apply",
            target: "Deployment ns/web".into(),
            before,
            after,
            note: None,
        }
    }

    #[test]
    fn a_change_is_a_unified_diff_against_the_live_object() {
        let text = render(&report(Some(json!({"spec": {"replicas": 1}})), Some(json!({"spec": {"replicas": 3}}))));
        assert!(text.starts_with("# dry run: plugin p would apply Deployment ns/web\n"), "{text}");
        assert!(text.contains("-  replicas: 1\n+  replicas: 3\n"), "{text}");
    }

    #[test]
    fn a_new_object_is_all_additions() {
        let text = render(&report(None, Some(json!({"kind": "Deployment"}))));
        assert!(text.contains("--- /dev/null (does not exist)") && text.contains("+kind: Deployment"), "{text}");
    }

    #[test]
    fn an_unchanged_object_says_so() {
        let same = json!({"spec": {"replicas": 1}});
        assert!(render(&report(Some(same.clone()), Some(same))).contains("no change"));
    }
}
