//! The system prompt's list of skills (progressive disclosure): every skill's name and
//! directory always, their descriptions within [`DESCRIPTION_BUDGET`]; past it, the longest
//! descriptions are cut first, so a hundred skills cost about as much as a few long ones and
//! no skill drops off the list.

use super::Skill;

/// Characters all descriptions may take together.
pub(super) const DESCRIPTION_BUDGET: usize = 8 * 1024;

const INTRO: &str = "Skills are folders of instructions, scripts and resources for \
particular tasks. When a task matches a skill's description, call activate_skill with its \
name before starting, and follow the instructions it returns (the user may also activate \
one with /name). Paths in a skill are relative to its directory; read its files with your \
file tools when its instructions ask for them.";

/// The longest each description may be for all of them to fit `budget`: every one whole when
/// they fit, else the largest cap under which their sum does.
fn cap(lengths: &[usize], budget: usize) -> usize {
    if lengths.iter().sum::<usize>() <= budget {
        return usize::MAX;
    }
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let mut left = budget;
    for (i, len) in sorted.iter().enumerate() {
        let share = left / (sorted.len() - i);
        if *len > share {
            return share;
        }
        left -= len;
    }
    usize::MAX
}

/// `<available_skills>` for `skills` (empty without any).
pub(super) fn section(skills: &[Skill]) -> String {
    if skills.is_empty() {
        return String::new();
    }
    let lengths: Vec<usize> = skills
        .iter()
        .map(|s| s.description.chars().count())
        .collect();
    let cap = cap(&lengths, DESCRIPTION_BUDGET);
    let mut out = format!("\n<available_skills>\n{INTRO}\n");
    for s in skills {
        let description = match s.description.char_indices().nth(cap) {
            Some((end, _)) => format!("{}...", &s.description[..end]),
            None => s.description.clone(),
        };
        out.push_str(&format!(
            "- {}: {} (directory: {})\n",
            s.name,
            description,
            s.dir.display()
        ));
    }
    out.push_str("</available_skills>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_proto::ExtensionScope;

    fn skill(n: usize, description: String) -> Skill {
        Skill {
            name: format!("skill-{n}"),
            description,
            dir: format!("/s/skill-{n}").into(),
            scope: ExtensionScope::User,
        }
    }

    #[test]
    fn descriptions_fit_whole_when_they_can() {
        assert_eq!(cap(&[10, 20], 100), usize::MAX);
        let s = section(&[skill(1, "Makes PDFs.".into())]);
        assert!(s.contains("- skill-1: Makes PDFs. (directory: /s/skill-1)"));
        assert!(section(&[]).is_empty());
    }

    #[test]
    fn past_the_budget_the_longest_descriptions_are_cut_and_every_skill_stays() {
        assert_eq!(cap(&[10, 1000, 1000], 210), 100);
        let skills: Vec<Skill> = (0..300).map(|n| skill(n, "d".repeat(1024))).collect();
        let s = section(&skills);
        for n in 0..300 {
            assert!(s.contains(&format!("- skill-{n}: ")), "skill-{n} missing");
        }
        let descriptions: usize = s
            .lines()
            .filter_map(|l| l.strip_prefix("- ")?.split_once(": "))
            .map(|(_, d)| d.split(" (directory").next().unwrap_or_default())
            .map(|d| d.trim_end_matches("...").len())
            .sum();
        assert!(descriptions <= DESCRIPTION_BUDGET, "{descriptions}");
        assert!(descriptions > DESCRIPTION_BUDGET - 300, "{descriptions}");
    }
}
