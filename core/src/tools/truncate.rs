//! Tool output truncation, exactly as spec 5.1-5.3: characters first (always), then lines.
//! The model gets the truncated text; `tool_call_end` keeps the full output. Each tool says
//! how much of its output the model sees ([`Tool::output_limits`](super::Tool)); the session's
//! config may set other limits by tool name.

use agentd_proto::SessionConfig;

/// Which part of an over-long output survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The beginning and the end.
    HeadTail,
    /// The end.
    Tail,
}

/// How much of a tool's output the model sees (spec 5.2, 5.3), unless the session's config
/// names the tool in `tool_output_limits` or `tool_line_limits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Most characters; a longer output is cut to this many.
    pub chars: usize,
    /// Which part of a longer output survives.
    pub keep: Keep,
    /// Most lines, counted after the characters are cut; `None`: characters suffice.
    pub lines: Option<usize>,
}

impl OutputLimits {
    /// At most `chars` characters, keeping the beginning and the end.
    pub const fn head_tail(chars: usize) -> Self {
        Self {
            chars,
            keep: Keep::HeadTail,
            lines: None,
        }
    }

    /// At most `chars` characters, keeping the end.
    pub const fn tail(chars: usize) -> Self {
        Self {
            chars,
            keep: Keep::Tail,
            lines: None,
        }
    }

    /// And at most `lines` lines, counted after the characters are cut.
    pub const fn lines(self, lines: usize) -> Self {
        Self {
            lines: Some(lines),
            ..self
        }
    }
}

impl Default for OutputLimits {
    /// 30,000 characters, beginning and end: what a tool gets unless it says otherwise.
    fn default() -> Self {
        Self::head_tail(30_000)
    }
}

/// Truncates by characters (spec 5.1).
pub(crate) fn truncate_chars(output: &str, max_chars: usize, mode: Keep) -> String {
    let len = output.chars().count();
    if len <= max_chars {
        return output.to_owned();
    }
    let removed = len - max_chars;
    match mode {
        Keep::HeadTail => {
            let half = max_chars / 2;
            format!(
                "{}\n\n[WARNING: Tool output was truncated. {removed} characters were removed from the middle. \
                 The full output is available in the event stream. \
                 If you need to see specific parts, re-run the tool with more targeted parameters.]\n\n{}",
                char_prefix(output, half),
                char_suffix(output, len, half),
            )
        }
        Keep::Tail => format!(
            "[WARNING: Tool output was truncated. First {removed} characters were removed. \
             The full output is available in the event stream.]\n\n{}",
            char_suffix(output, len, max_chars),
        ),
    }
}

/// Truncates by lines, keeping the first and last halves (spec 5.3).
pub(crate) fn truncate_lines(output: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = output.split('\n').collect();
    if lines.len() <= max_lines {
        return output.to_owned();
    }
    let head = max_lines / 2;
    let tail = max_lines - head;
    let omitted = lines.len() - head - tail;
    format!(
        "{}\n[... {omitted} lines omitted ...]\n{}",
        lines[..head].join("\n"),
        lines[lines.len() - tail..].join("\n")
    )
}

/// The full pipeline for the output of tool `tool`, whose own limits are `limits`, under a
/// session's config.
pub(crate) fn truncate_tool_output(
    output: &str,
    tool: &str,
    limits: OutputLimits,
    config: &SessionConfig,
) -> String {
    let max_chars = config
        .tool_output_limits
        .get(tool)
        .copied()
        .unwrap_or(limits.chars);
    let result = truncate_chars(output, max_chars, limits.keep);
    match config.tool_line_limits.get(tool).copied().or(limits.lines) {
        Some(max_lines) => truncate_lines(&result, max_lines),
        None => result,
    }
}

fn char_prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn char_suffix(s: &str, len: usize, n: usize) -> &str {
    match s.char_indices().nth(len - n) {
        Some((i, _)) => &s[i..],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_both_ends_and_counts_removed_chars() {
        let s = format!("{}{}", "a".repeat(60), "b".repeat(60));
        let t = truncate_chars(&s, 20, Keep::HeadTail);
        assert!(t.starts_with(&"a".repeat(10)));
        assert!(t.ends_with(&"b".repeat(10)));
        assert!(t.contains("100 characters were removed from the middle"));
    }

    #[test]
    fn tail_keeps_the_end() {
        let t = truncate_chars("0123456789", 4, Keep::Tail);
        assert!(
            t.starts_with("[WARNING: Tool output was truncated. First 6 characters were removed.")
        );
        assert!(t.ends_with("\n\n6789"));
    }

    #[test]
    fn short_output_is_untouched() {
        assert_eq!(truncate_chars("héllo", 5, Keep::HeadTail), "héllo");
        assert_eq!(truncate_lines("a\nb", 2), "a\nb");
    }

    #[test]
    fn multibyte_characters_are_counted_as_characters() {
        let s = "é".repeat(30);
        let t = truncate_chars(&s, 10, Keep::HeadTail);
        assert!(t.starts_with("ééééé\n"));
        assert!(t.contains("20 characters were removed"));
    }

    #[test]
    fn lines_keep_head_and_tail() {
        let s: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
        assert_eq!(
            truncate_lines(&s.join("\n"), 4),
            "1\n2\n[... 6 lines omitted ...]\n9\n10"
        );
    }

    /// Spec 5.2's character limits and 5.3's line limits, each on its tool; tools the spec
    /// does not list get the default.
    #[test]
    fn each_tool_has_the_spec_s_limits() {
        use crate::tools::*;
        use Keep::{HeadTail, Tail};
        let tools: [&dyn Tool; 14] = [
            &ReadFile,
            &ReadManyFiles,
            &Shell,
            &Grep { output_modes: true },
            &Glob,
            &ListDir,
            &EditFile,
            &ApplyPatch,
            &WriteFile,
            &SpawnAgent,
            &Wait,
            &AskUser,
            &SendInput,
            &CloseAgent,
        ];
        let limits = tools.map(|t| {
            let l = t.output_limits();
            (t.definition().name, l.chars, l.keep, l.lines)
        });
        let want = [
            ("read_file", 50_000, HeadTail, None),
            ("read_many_files", 50_000, HeadTail, None),
            ("shell", 30_000, HeadTail, Some(256)),
            ("grep", 20_000, Tail, Some(200)),
            ("glob", 20_000, Tail, Some(500)),
            ("list_dir", 20_000, Tail, None),
            ("edit_file", 10_000, Tail, None),
            ("apply_patch", 10_000, Tail, None),
            ("write_file", 1_000, Tail, None),
            ("spawn_agent", 20_000, HeadTail, None),
            ("wait", 20_000, HeadTail, None),
            ("ask_user", 30_000, HeadTail, None),
            ("send_input", 30_000, HeadTail, None),
            ("close_agent", 30_000, HeadTail, None),
        ]
        .map(|(name, chars, keep, lines)| (name.to_owned(), chars, keep, lines));
        assert_eq!(limits, want);
    }

    #[test]
    fn characters_run_before_lines_on_a_huge_single_line() {
        let config = crate::config::default_session_config("anthropic", "m");
        let s = "x".repeat(10_000_000);
        let limits = crate::tools::Tool::output_limits(&crate::tools::ReadFile);
        let t = truncate_tool_output(&s, "read_file", limits, &config);
        assert!(t.len() < 51_000);
        assert!(t.contains("[WARNING: Tool output was truncated. 9950000 characters were removed"));
    }
}
