//! Which replica runs which plugin: rendezvous (highest random weight) hashing.
//!
//! Every replica computes the same answer from the same live members, with no coordination
//! beyond the member Leases: a plugin goes to the member whose score for it is highest. When a
//! member leaves, only its plugins move (each to its next-highest member); when one joins, only
//! the plugins it now scores highest on move to it, about `1/n` of them.

/// The member that runs `plugin`, of `members` (none when there are none).
///
/// ```
/// # use wasmloop::shard::hashing::owner;
/// let members = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
/// let first = owner("mirror", &members).unwrap();
/// // The answer does not depend on the order members are listed in.
/// let reversed: Vec<String> = members.iter().rev().cloned().collect();
/// assert_eq!(owner("mirror", &reversed), Some(first));
/// ```
pub fn owner<'a>(plugin: &str, members: &'a [String]) -> Option<&'a str> {
    // Ties (never seen with SHA-256, but possible) go to the smaller name, so that every
    // replica agrees whatever its list's order.
    members
        .iter()
        .map(|m| (score(m, plugin), m))
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
        .map(|(_, m)| m.as_str())
}

/// A stable score: the same in every process and release, unlike `std`'s randomly keyed
/// hasher. The NUL keeps `("ab", "c")` apart from `("a", "bc")`.
fn score(member: &str, plugin: &str) -> u64 {
    let digest = wasmloop_sandbox::digest(format!("{member}\0{plugin}").as_bytes());
    u64::from_str_radix(&digest[..16], 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn plugins() -> Vec<String> {
        (0..300).map(|i| format!("plugin-{i}")).collect()
    }

    #[test]
    fn nobody_owns_anything_without_members() {
        assert_eq!(owner("p", &[]), None);
    }

    #[test]
    fn a_member_leaving_moves_only_its_own_plugins() {
        let (before, after) = (members(&["a", "b", "c"]), members(&["a", "c"]));
        for plugin in plugins() {
            let was = owner(&plugin, &before).unwrap();
            let is = owner(&plugin, &after).unwrap();
            if was != "b" {
                assert_eq!(was, is, "{plugin} moved though its member stayed");
            }
        }
    }

    #[test]
    fn a_member_joining_takes_a_fair_share_and_nothing_else_moves() {
        let (before, after) = (members(&["a", "b"]), members(&["a", "b", "c"]));
        let mut taken = 0;
        for plugin in plugins() {
            let (was, is) = (owner(&plugin, &before).unwrap(), owner(&plugin, &after).unwrap());
            if was != is {
                assert_eq!(is, "c", "{plugin} moved between the members that stayed");
                taken += 1;
            }
        }
        // A third of 300, give or take what a hash gives.
        assert!((70..=130).contains(&taken), "c took {taken} of 300");
    }

    #[test]
    fn the_share_is_even_enough_across_three_members() {
        let all = members(&["a", "b", "c"]);
        for member in &all {
            let mine = plugins().iter().filter(|p| owner(p, &all) == Some(member.as_str())).count();
            assert!((70..=130).contains(&mine), "{member} owns {mine} of 300");
        }
    }
}
