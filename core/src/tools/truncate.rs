//! Tool output truncation, exactly as spec 5.1-5.3: characters first (always), then lines.
//! The model gets the truncated text; `tool_call_end` keeps the full output.

use agentd_proto::SessionConfig;

/// Which part of an over-long output survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Keep the beginning and the end.
    HeadTail,
    /// Keep the end.
    Tail,
}

/// Default character limit and mode per tool (spec 5.2).
pub(crate) fn default_char_limit(tool: &str) -> (usize, Mode) {
    match tool {
        "read_file" | "read_many_files" => (50_000, Mode::HeadTail),
        "shell" => (30_000, Mode::HeadTail),
        "grep" | "glob" | "list_dir" => (20_000, Mode::Tail),
        "edit_file" | "apply_patch" => (10_000, Mode::Tail),
        "write_file" => (1_000, Mode::Tail),
        "spawn_agent" | "wait" => (20_000, Mode::HeadTail),
        _ => (30_000, Mode::HeadTail),
    }
}

/// Default line limit per tool (spec 5.3); `None` means characters suffice.
pub(crate) fn default_line_limit(tool: &str) -> Option<usize> {
    match tool {
        "shell" => Some(256),
        "grep" => Some(200),
        "glob" => Some(500),
        _ => None,
    }
}

/// Truncates by characters (spec 5.1).
pub(crate) fn truncate_chars(output: &str, max_chars: usize, mode: Mode) -> String {
    let len = output.chars().count();
    if len <= max_chars {
        return output.to_owned();
    }
    let removed = len - max_chars;
    match mode {
        Mode::HeadTail => {
            let half = max_chars / 2;
            format!(
                "{}\n\n[WARNING: Tool output was truncated. {removed} characters were removed from the middle. \
                 The full output is available in the event stream. \
                 If you need to see specific parts, re-run the tool with more targeted parameters.]\n\n{}",
                char_prefix(output, half),
                char_suffix(output, len, half),
            )
        }
        Mode::Tail => format!(
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

/// The full pipeline for one tool's output under a session's limits.
pub(crate) fn truncate_tool_output(output: &str, tool: &str, config: &SessionConfig) -> String {
    let (default_chars, mode) = default_char_limit(tool);
    let max_chars = config
        .tool_output_limits
        .get(tool)
        .copied()
        .unwrap_or(default_chars);
    let result = truncate_chars(output, max_chars, mode);
    match config
        .tool_line_limits
        .get(tool)
        .copied()
        .or_else(|| default_line_limit(tool))
    {
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
        let t = truncate_chars(&s, 20, Mode::HeadTail);
        assert!(t.starts_with(&"a".repeat(10)));
        assert!(t.ends_with(&"b".repeat(10)));
        assert!(t.contains("100 characters were removed from the middle"));
    }

    #[test]
    fn tail_keeps_the_end() {
        let t = truncate_chars("0123456789", 4, Mode::Tail);
        assert!(
            t.starts_with("[WARNING: Tool output was truncated. First 6 characters were removed.")
        );
        assert!(t.ends_with("\n\n6789"));
    }

    #[test]
    fn short_output_is_untouched() {
        assert_eq!(truncate_chars("héllo", 5, Mode::HeadTail), "héllo");
        assert_eq!(truncate_lines("a\nb", 2), "a\nb");
    }

    #[test]
    fn multibyte_characters_are_counted_as_characters() {
        let s = "é".repeat(30);
        let t = truncate_chars(&s, 10, Mode::HeadTail);
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

    #[test]
    fn characters_run_before_lines_on_a_huge_single_line() {
        let config = crate::config::default_session_config("anthropic", "m");
        let s = "x".repeat(10_000_000);
        let t = truncate_tool_output(&s, "read_file", &config);
        assert!(t.len() < 51_000);
        assert!(t.contains("[WARNING: Tool output was truncated. 9950000 characters were removed"));
    }
}
