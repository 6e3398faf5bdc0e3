//! One table of cases every cache a plugin reads through must answer alike: the host's
//! informers and the offline cache (through the sandbox's imports) and the SDK's test host.
//! The host's informers are the reference. Seeds stay under the informer's 10,000-entry
//! page scan, so page sizes are exact.
//!
//! An adapter builds its cache from each [`Seed`] and answers as a plugin's imports answer;
//! [`run`] asks every case and fails once, listing each case that failed:
//!
//! ```ignore
//! wasmloop_contract::conformance::run(|seed| MyCache::from(seed));
//! ```

use crate::cache::{Kept, LAST_APPLIED, ListKey, token_of};
use serde_json::{Value, json};

/// A kind the suite seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// Its apiVersion, `group/version` or `version`.
    pub api_version: &'static str,
    /// Its kind.
    pub kind: &'static str,
    /// False for a cluster-scoped kind.
    pub namespaced: bool,
}
const CONFIGMAP: Kind = Kind { api_version: "v1", kind: "ConfigMap", namespaced: true };
const NODE: Kind = Kind { api_version: "v1", kind: "Node", namespaced: false };
const DEPLOYMENT: Kind = Kind { api_version: "apps/v1", kind: "Deployment", namespaced: true };
/// Every kind the suite asks about but those in [`WATCHED`]. An adapter declares all:
/// `KINDS[0]` as primary, the rest as reads.
pub const KINDS: [Kind; 3] = [CONFIGMAP, NODE, DEPLOYMENT];
/// The kinds an adapter declares metadata-only.
pub const METADATA_ONLY: [Kind; 1] = [DEPLOYMENT];
const SERVICE: Kind = Kind { api_version: "v1", kind: "Service", namespaced: true };
/// Watches an adapter declares (kind, namespace, label selector), of kinds declared nowhere
/// else, so its cache holds only what they select (`cache::Visible`): Services labelled
/// `app=web` anywhere, and those labelled `tier=db` in namespace `b`.
pub const WATCHED: [(Kind, Option<&str>, &str); 2] = [(SERVICE, None, "app=web"), (SERVICE, Some("b"), "tier=db")];
/// What an adapter's plugin keeps of the fields caches strip (contract 0.2.1 `keep-fields`):
/// Nodes keep `managedFields`; everything else is stripped.
pub const KEEPS: [(Kind, Kept); 1] = [(NODE, Kept { managed_fields: true, last_applied: false })];

/// Why a cache refused a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The label selector does not parse.
    InvalidSelector,
    /// The continue token is no position the cache produces.
    InvalidContinue,
    /// Any other refusal, in the cache's words: no case expects one.
    Other(String),
}

/// One page of a listing, as keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The objects, as (namespace, name).
    pub keys: Vec<ListKey>,
    /// The continue token, when another page follows.
    pub token: Option<String>,
}

/// A cache built from a seed, asked as a plugin asks: limit as given (0 = host page size),
/// tokens as strings. Keys are (namespace, name), namespace "" when cluster-scoped.
pub trait CacheUnderTest {
    /// The object `name` of `kind` in `namespace` (in any namespace when none), as served.
    fn get(&mut self, kind: Kind, namespace: Option<&str>, name: &str) -> Result<Option<Value>, Refused>;
    /// One page of the objects of `kind` in `namespace` matching `selector`, after `token`.
    fn list_page(
        &mut self,
        kind: Kind,
        namespace: Option<&str>,
        selector: Option<&str>,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page, Refused>;
}
/// Objects by kind, in the order the cache receives them (deliberately unsorted).
pub type Seed = Vec<(Kind, Vec<Value>)>;

fn object(kind: Kind, namespace: Option<&str>, name: &str, labels: Value) -> Value {
    let mut metadata = json!({"name": name, "labels": labels, "uid": format!("{}-{name}", namespace.unwrap_or(""))});
    if let Some(ns) = namespace {
        metadata["namespace"] = ns.into();
    }
    json!({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata})
}
/// Namespace `a-b` sorts after `a`, but its token "a-b/x" sorts *before* "a/z" as text.
fn base() -> Seed {
    let cm = |ns, n, l| object(CONFIGMAP, Some(ns), n, l);
    let node = |n, l| object(NODE, None, n, l);
    let mut n1 = node("n1", json!({"role": "control"}));
    n1["spec"] = json!({"unschedulable": true});
    let applied = json!({LAST_APPLIED: "{}"});
    n1["metadata"]["managedFields"] = json!([{"manager": "kubelet"}]);
    n1["metadata"]["annotations"] = applied.clone();
    let mut deployment = object(DEPLOYMENT, Some("a"), "web", json!({"app": "web"}));
    deployment["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
    deployment["metadata"]["annotations"] = applied.clone();
    let mut b_web = cm("b", "web", json!({"app": "web", "tier": "web"}));
    b_web["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
    b_web["metadata"]["annotations"] = applied;
    deployment["spec"] = json!({"replicas": 1});
    deployment["status"] = json!({"replicas": 1});
    vec![
        (
            CONFIGMAP,
            vec![
                b_web,
                cm("a", "web-2", json!({"app": "db", "legacy": "true"})),
                cm("a-b", "x", json!({})),
                cm("a", "web", json!({"app": "web", "tier": "api"})),
                cm("a", "z", json!({"tier": "cache"})),
                cm("a", "web-10", json!({"app": "web"})),
            ],
        ),
        (NODE, vec![node("n2", json!({"role": "worker"})), node("n10", json!({})), n1]),
        (DEPLOYMENT, vec![deployment]),
        (
            SERVICE,
            vec![
                object(SERVICE, Some("b"), "api", json!({"app": "web"})),
                object(SERVICE, Some("a"), "db", json!({"app": "db"})),
                object(SERVICE, Some("a"), "bare", json!({})),
                object(SERVICE, Some("a"), "api", json!({"app": "web", "tier": "api"})),
                object(SERVICE, Some("b"), "cache", json!({"tier": "db"})),
                object(SERVICE, Some("a"), "cache", json!({"tier": "db"})),
            ],
        ),
    ]
}
/// More objects than a page holds, seeded in reverse order.
fn bulk() -> Seed {
    let mut v: Vec<Value> =
        (0..600).map(|i| object(CONFIGMAP, Some("bulk"), &format!("cm-{i:03}"), json!({}))).collect();
    v.reverse();
    vec![(CONFIGMAP, v)]
}
/// One key seeded twice: a cache holds it once, as seeded last.
fn duplicates() -> Seed {
    vec![(
        CONFIGMAP,
        vec![
            object(CONFIGMAP, Some("a"), "dup", json!({"gen": "1"})),
            object(CONFIGMAP, Some("a"), "dup", json!({"gen": "2"})),
        ],
    )]
}

enum Ask {
    Get(&'static str),
    List { selector: Option<&'static str>, limit: u32, token: Option<&'static str> },
}
enum Expect {
    Found(Option<(&'static str, &'static str)>),
    /// Found, holding these top-level fields, `metadata.managedFields` when the first flag is
    /// set and the last-applied annotation when the second is.
    Fields(&'static [&'static str], bool, bool),
    Keys(&'static [(&'static str, &'static str)], Option<&'static str>),
    Refused(Refused),
    /// Following tokens gives pages of these sizes, and every seeded key once, in order.
    Walk(&'static [usize]),
}
struct Case {
    name: &'static str,
    seed: &'static str,
    kind: Kind,
    namespace: Option<&'static str>,
    ask: Ask,
    expect: Expect,
}

type K = (&'static str, &'static str);
const AW: K = ("a", "web");
const AW10: K = ("a", "web-10");
const AW2: K = ("a", "web-2");
const AZ: K = ("a", "z");
const ABX: K = ("a-b", "x");
const BW: K = ("b", "web");
const ALL: &[K] = &[AW, AW10, AW2, AZ, ABX, BW];
const N1: K = ("", "n1");
const N10: K = ("", "n10");
const N2: K = ("", "n2");

fn cases() -> Vec<Case> {
    use Expect::*;
    let get =
        |name, kind, ns, n, e| Case { name, seed: "base", kind, namespace: ns, ask: Ask::Get(n), expect: Found(e) };
    let list = |name, seed, kind, ns, selector, limit, token, expect| Case {
        name,
        seed,
        kind,
        namespace: ns,
        ask: Ask::List { selector, limit, token },
        expect,
    };
    let sel = |name, s, keys| list(name, "base", CONFIGMAP, None, Some(s), 0, None, Keys(keys, None));
    let bad_sel =
        |name, s| list(name, "base", CONFIGMAP, None, Some(s), 0, None, Refused(self::Refused::InvalidSelector));
    let bad_token =
        |name, t| list(name, "base", CONFIGMAP, None, None, 0, Some(t), Refused(self::Refused::InvalidContinue));
    let walk = |name, limit, pages| list(name, "bulk", CONFIGMAP, None, None, limit, None, Walk(pages));
    vec![
        get("namespaced get", CONFIGMAP, Some("b"), "web", Some(BW)),
        get("namespaced get elsewhere", CONFIGMAP, Some("c"), "web", None),
        get("an empty namespace is just a namespace", CONFIGMAP, Some(""), "web", None),
        get("a get without a namespace finds the first in list order", CONFIGMAP, None, "web", Some(AW)),
        get("a namespace given for a cluster-scoped kind is ignored", NODE, Some("default"), "n1", Some(N1)),
        get("cluster-scoped get without a namespace", NODE, None, "n1", Some(N1)),
        get("missing cluster-scoped object", NODE, Some("default"), "n3", None),
        get("kinds do not mix", DEPLOYMENT, Some("b"), "web", None),
        get("kinds do not mix (found)", DEPLOYMENT, Some("a"), "web", Some(AW)),
        Case {
            name: "a metadata-only kind is served as its type and metadata, without managedFields",
            seed: "base",
            kind: DEPLOYMENT,
            namespace: Some("a"),
            ask: Ask::Get("web"),
            expect: Fields(&["apiVersion", "kind", "metadata"], false, false),
        },
        Case {
            name: "a kind served whole keeps its spec, and managedFields when the plugin keeps them",
            seed: "base",
            kind: NODE,
            namespace: None,
            ask: Ask::Get("n1"),
            expect: Fields(&["apiVersion", "kind", "metadata", "spec"], true, false),
        },
        Case {
            name: "managedFields and the last-applied annotation are stripped unless kept",
            seed: "base",
            kind: CONFIGMAP,
            namespace: Some("b"),
            ask: Ask::Get("web"),
            expect: Fields(&["apiVersion", "kind", "metadata"], false, false),
        },
        list(
            "a kind watched only through a selector holds only what it selects",
            "base",
            SERVICE,
            None,
            None,
            0,
            None,
            Keys(&[("a", "api"), ("b", "api"), ("b", "cache")], None),
        ),
        get("...and finds nothing else", SERVICE, Some("a"), "db", None),
        get("...nor what a watch selects outside its namespace", SERVICE, Some("a"), "cache", None),
        get("...which a get without a namespace passes over", SERVICE, None, "cache", Some(("b", "cache"))),
        list("...whatever the look-up selects", "base", SERVICE, None, Some("app=db"), 0, None, Keys(&[], None)),
        list("...in pages", "base", SERVICE, None, None, 1, None, Keys(&[("a", "api")], Some("a/api"))),
        list("(namespace, name) order", "base", CONFIGMAP, None, None, 0, None, Keys(ALL, None)),
        list("one namespace", "base", CONFIGMAP, Some("a"), None, 0, None, Keys(&[AW, AW10, AW2, AZ], None)),
        list("a namespace extending another's name", "base", CONFIGMAP, Some("a-b"), None, 0, None, Keys(&[ABX], None)),
        list("an empty namespace", "base", CONFIGMAP, Some("c"), None, 0, None, Keys(&[], None)),
        list(
            "a namespace given for a cluster-scoped list is ignored",
            "base",
            NODE,
            Some("kube-system"),
            None,
            0,
            None,
            Keys(&[N1, N10, N2], None),
        ),
        list("kinds do not mix (list)", "base", DEPLOYMENT, None, None, 0, None, Keys(&[AW], None)),
        sel("equality", "app=web", &[AW, AW10, BW]),
        sel("== and spaces", " app == web ", &[AW, AW10, BW]),
        sel("!= includes the unlabelled", "app!=web", &[AW2, AZ, ABX]),
        sel("in", "tier in (web,api)", &[AW, BW]),
        sel("notin includes the unlabelled", "tier notin (web, api)", &[AW10, AW2, AZ, ABX]),
        sel("exists", "legacy", &[AW2]),
        sel("does not exist", "!legacy", &[AW, AW10, AZ, ABX, BW]),
        sel("every requirement", "app=web,tier=api", &[AW]),
        sel("the empty selector", "", ALL),
        list("cluster-scoped with a selector", "base", NODE, None, Some("role"), 0, None, Keys(&[N1, N2], None)),
        list("namespace and selector", "base", CONFIGMAP, Some("a"), Some("app=web"), 0, None, Keys(&[AW, AW10], None)),
        bad_sel("a set without parentheses", "app in web"),
        bad_sel("an unclosed set", "tier in (web"),
        bad_sel("no key", "=web"),
        bad_sel("unknown operator", "a b (c)"),
        list("a page of one", "base", CONFIGMAP, None, None, 1, None, Keys(&[AW], Some("a/web"))),
        list(
            "next page after the token",
            "base",
            CONFIGMAP,
            None,
            None,
            1,
            Some("a/web"),
            Keys(&[AW10], Some("a/web-10")),
        ),
        list(
            "tokens compare as (namespace, name), not as text",
            "base",
            CONFIGMAP,
            None,
            None,
            1,
            Some("a/z"),
            Keys(&[ABX], Some("a-b/x")),
        ),
        list("a full last page has no token", "base", CONFIGMAP, None, None, 6, None, Keys(ALL, None)),
        list("one short of the end", "base", CONFIGMAP, None, None, 5, None, Keys(&ALL[..5], Some("a-b/x"))),
        list(
            "the last page of a namespace",
            "base",
            CONFIGMAP,
            Some("a"),
            None,
            2,
            Some("a/web-10"),
            Keys(&[AW2, AZ], None),
        ),
        list("a selected page", "base", CONFIGMAP, None, Some("app=web"), 2, None, Keys(&[AW, AW10], Some("a/web-10"))),
        list("a selected last page", "base", CONFIGMAP, None, Some("app=web"), 2, Some("a/web-10"), Keys(&[BW], None)),
        list(
            "a token is a position, not an object",
            "base",
            CONFIGMAP,
            None,
            None,
            0,
            Some("a/web-0"),
            Keys(&ALL[1..], None),
        ),
        list("a token before the namespace", "base", CONFIGMAP, Some("b"), None, 0, Some("a/z"), Keys(&[BW], None)),
        list("a token past the namespace", "base", CONFIGMAP, Some("a"), None, 0, Some("b/a"), Keys(&[], None)),
        list("a token past every key", "base", CONFIGMAP, None, None, 0, Some("zz/zz"), Keys(&[], None)),
        list("a cluster-scoped token", "base", NODE, None, None, 0, Some("/n1"), Keys(&[N10, N2], None)),
        list(
            "a cluster-scoped token, namespace given",
            "base",
            NODE,
            Some("x"),
            None,
            1,
            Some("/n1"),
            Keys(&[N10], Some("/n10")),
        ),
        bad_token("an empty token", ""),
        bad_token("a token without a /", "web"),
        bad_token("a token without a name", "a/"),
        bad_token("a token with two /", "a/b/c"),
        list(
            "the selector is checked before the token",
            "base",
            CONFIGMAP,
            None,
            Some("tier in (web"),
            0,
            Some("web"),
            Refused(self::Refused::InvalidSelector),
        ),
        walk("limit 0 is the host's page size", 0, &[500, 100]),
        walk("limit 500", 500, &[500, 100]),
        walk("limit 501 is held to 500", 501, &[500, 100]),
        walk("limit u32::MAX", u32::MAX, &[500, 100]),
        walk("limit 250", 250, &[250, 250, 100]),
        list(
            "a key seeded twice is served once",
            "duplicates",
            CONFIGMAP,
            None,
            None,
            0,
            None,
            Keys(&[("a", "dup")], None),
        ),
        list("...as seeded last", "duplicates", CONFIGMAP, None, Some("gen=2"), 0, None, Keys(&[("a", "dup")], None)),
        list("...not as seeded first", "duplicates", CONFIGMAP, None, Some("gen=1"), 0, None, Keys(&[], None)),
    ]
}

fn owned(keys: &[K]) -> Vec<ListKey> {
    keys.iter().map(|(n, m)| ((*n).into(), (*m).into())).collect()
}
fn key_of(v: &Value) -> ListKey {
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    (text("/metadata/namespace"), text("/metadata/name"))
}

fn seeded(seed: &Seed, kind: Kind) -> Vec<ListKey> {
    let mut all: Vec<ListKey> =
        seed.iter().filter(|(k, _)| *k == kind).flat_map(|(_, o)| o.iter().map(key_of)).collect();
    all.sort();
    all.dedup();
    all
}

impl Case {
    fn check(&self, cache: &mut impl CacheUnderTest, seed: &Seed) -> Result<(), String> {
        let (kind, ns) = (self.kind, self.namespace);
        match (&self.ask, &self.expect) {
            (Ask::Get(name), Expect::Found(want)) => {
                let got = cache.get(kind, ns, name).map_err(|r| format!("refused: {r:?}"))?;
                let got = got.as_ref().map(key_of);
                let want = want.map(|(n, m)| (n.to_owned(), m.to_owned()));
                if got == want { Ok(()) } else { Err(format!("got {got:?}, want {want:?}")) }
            }
            (Ask::Get(name), Expect::Fields(fields, managed, applied)) => {
                let got = cache.get(kind, ns, name).map_err(|r| format!("refused: {r:?}"))?.ok_or("not found")?;
                let mut top: Vec<&str> =
                    got.as_object().into_iter().flat_map(|o| o.keys()).map(String::as_str).collect();
                top.sort_unstable();
                let has_applied = got.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)).is_some();
                if top != *fields
                    || got.pointer("/metadata/managedFields").is_some() != *managed
                    || has_applied != *applied
                {
                    return Err(format!(
                        "served {got}, want the fields {fields:?}, managedFields kept: {managed}, last-applied kept: {applied}"
                    ));
                }
                Ok(())
            }
            (Ask::List { selector, limit, token }, Expect::Keys(keys, t)) => {
                let got =
                    cache.list_page(kind, ns, *selector, *limit, *token).map_err(|r| format!("refused: {r:?}"))?;
                let want = Page { keys: owned(keys), token: t.map(str::to_owned) };
                if got == want { Ok(()) } else { Err(format!("got {got:?}, want {want:?}")) }
            }
            (Ask::List { selector, limit, token }, Expect::Refused(want)) => {
                match cache.list_page(kind, ns, *selector, *limit, *token) {
                    Err(got) if got == *want => Ok(()),
                    other => Err(format!("got {other:?}, want {want:?}")),
                }
            }
            (Ask::List { selector, limit, .. }, Expect::Walk(sizes)) => {
                let (mut keys, mut pages, mut token) = (Vec::new(), Vec::new(), None::<String>);
                loop {
                    let page = cache
                        .list_page(kind, ns, *selector, *limit, token.as_deref())
                        .map_err(|r| format!("refused: {r:?}"))?;
                    if let (Some(t), Some(last)) = (&page.token, page.keys.last())
                        && *t != token_of(last)
                    {
                        return Err(format!("token {t:?} is not the page's last key {last:?}"));
                    }
                    pages.push(page.keys.len());
                    keys.extend(page.keys);
                    match page.token {
                        Some(t) if pages.len() < 100 => token = Some(t),
                        Some(_) => return Err("100 pages".into()),
                        None => break,
                    }
                }
                if pages != *sizes {
                    return Err(format!("pages of {pages:?}, want {sizes:?}"));
                }
                if keys != seeded(seed, kind) {
                    return Err("the pages do not hold every key once, in order".into());
                }
                Ok(())
            }
            _ => unreachable!("a get pairs with Found, a list with the rest"),
        }
    }
}

/// Runs every case against caches `make` builds from each seed; fails once, listing every case that failed.
pub fn run<C: CacheUnderTest>(mut make: impl FnMut(&Seed) -> C) {
    let mut failures = Vec::new();
    for (name, seed) in [("base", base()), ("bulk", bulk()), ("duplicates", duplicates())] {
        let mut cache = make(&seed);
        for case in cases().into_iter().filter(|c| c.seed == name) {
            if let Err(why) = case.check(&mut cache, &seed) {
                failures.push(format!("{}: {why}", case.name));
            }
        }
    }
    assert!(failures.is_empty(), "{} cache conformance case(s) fail:\n  {}", failures.len(), failures.join("\n  "));
}
