//! The names the model sees: `mcp__SERVER__TOOL`, with every character outside
//! `[A-Za-z0-9_-]` replaced by `_`, at most 64 characters, unique in the session. A name too
//! long or already taken is cut and ends with a hash of the server and tool, so the same
//! server and tool always get the same name (provider prompt caches keep hitting).

use std::collections::HashSet;

/// Longest tool name every provider takes.
pub(super) const MAX_NAME: usize = 64;
/// The prefix of every MCP tool's name; no other tool may use it.
pub(crate) const PREFIX: &str = "mcp__";

/// The model's name for `server`'s tool `tool`, not in `taken`, which it is added to.
pub(super) fn tool_name(server: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let full = format!("{PREFIX}{}__{}", clean(server), clean(tool));
    let name = if full.len() <= MAX_NAME && !taken.contains(&full) {
        full
    } else {
        let mut salt = 0u32;
        loop {
            let hash = fnv1a(format!("{server}\0{tool}\0{salt}").as_bytes());
            let suffix = format!("_{:08x}", hash as u32);
            let keep = MAX_NAME - suffix.len();
            let name = format!("{}{suffix}", &full[..full.len().min(keep)]);
            if !taken.contains(&name) {
                break name;
            }
            salt += 1;
        }
    };
    taken.insert(name.clone());
    name
}

/// FNV-1a: stable across builds and runs, unlike std's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        name.len() <= MAX_NAME
            && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_valid_unique_and_stable() {
        let mut taken = HashSet::new();
        assert_eq!(tool_name("git", "status", &mut taken), "mcp__git__status");
        let odd = tool_name("git", "diff.staged/ü", &mut taken);
        assert_eq!(odd, "mcp__git__diff_staged__");
        // Another name that cleans to the same text gets a hashed one.
        let other = tool_name("git", "diff staged/ü", &mut taken);
        assert!(valid(&other) && other != odd, "{other}");
        let long = "x".repeat(200);
        let a = tool_name("srv", &long, &mut taken);
        assert!(valid(&a), "{a}");
        let b = tool_name("srv", &format!("{long}y"), &mut taken);
        assert!(valid(&b) && a != b, "{a} {b}");
        // The same server and tool get the same name in another session.
        let mut again = HashSet::new();
        assert_eq!(tool_name("srv", &long, &mut again), a);
    }
}
