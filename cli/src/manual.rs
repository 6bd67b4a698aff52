//! `sluice completions SHELL` and `sluice man`: shell completion scripts and
//! roff man pages, generated from the command line's own clap definitions so
//! that they cannot drift from it.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap_complete::Shell;

/// The completion script of `shell` for `command`, which is `sluice`.
pub(crate) fn completion_script(shell: Shell, mut command: clap::Command) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "sluice", &mut script);
    script
}

/// The man page of `command` alone (its subcommands listed, not described).
pub(crate) fn man_page(command: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    Ok(page)
}

/// Writes a page for `command` and one for each subcommand, at every depth
/// (`sluice.1`, `sluice-ctl.1`, `sluice-ctl-rollout-watch.1`, ...), into
/// `dir` (made if missing); the names of the `sluice*.1` pages then in
/// `dir`, sorted.
pub(crate) fn man_pages(command: clap::Command, dir: &Path) -> anyhow::Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| dir.display().to_string())?;
    clap_mangen::generate_to(command, dir).with_context(|| dir.display().to_string())?;
    let mut pages = pages_in(dir)?;
    pages.sort();
    Ok(pages)
}

fn pages_in(dir: &Path) -> anyhow::Result<Vec<String>> {
    let entries = std::fs::read_dir(dir).with_context(|| dir.display().to_string())?;
    let mut pages = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.starts_with("sluice") && name.ends_with(".1") {
            pages.push(name);
        }
    }
    Ok(pages)
}

/// `sluice completions SHELL`: the script on stdout.
pub(crate) fn completions(shell: Shell, command: clap::Command) -> anyhow::Result<ExitCode> {
    write_stdout(&completion_script(shell, command))
}

/// `sluice man [--out DIR]`: the page on stdout, or every page into `DIR`.
pub(crate) fn man(command: clap::Command, out: Option<&Path>) -> anyhow::Result<ExitCode> {
    match out {
        None => write_stdout(&man_page(command)?),
        Some(dir) => {
            let pages = man_pages(command, dir)?;
            crate::out(&format!("{} man pages in {}", pages.len(), dir.display()));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A reader that went away (`| head`) is not an error.
fn write_stdout(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let _ = std::io::stdout().lock().write_all(bytes);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::CommandFactory as _;

    use super::*;

    #[test]
    fn completion_scripts_know_the_verbs() {
        let script =
            |shell| String::from_utf8(completion_script(shell, crate::Cli::command())).unwrap();
        let bash = script(Shell::Bash);
        for verb in ["ctl", "load", "rollout", "watch", "completions"] {
            assert!(bash.contains(verb), "bash script lacks {verb}");
        }
        for shell in [Shell::Zsh, Shell::Fish] {
            let text = script(shell);
            assert!(
                text.contains("sluice") && text.contains("ctl"),
                "{shell}: {text}"
            );
        }
    }

    #[test]
    fn the_man_page_names_every_top_level_command() {
        let page = String::from_utf8(man_page(crate::Cli::command()).unwrap()).unwrap();
        // roff: the title first, after the two lines that define a quote
        // character (`.ie` / `.el`), as every clap_mangen page opens.
        let mut lines = page
            .lines()
            .skip_while(|l| l.starts_with(".ie") || l.starts_with(".el"));
        let title = lines.next().unwrap_or_default();
        assert!(title.starts_with(".TH sluice 1 "), "{page}");
        // Each command as `sluice\-NAME(1)` (roff escapes every hyphen).
        for command in crate::Cli::command().get_subcommands() {
            let name = command.get_name();
            let entry = format!("sluice-{name}(1)").replace('-', "\\-");
            assert!(page.contains(&entry), "{entry} missing:\n{page}");
        }
    }

    #[test]
    fn man_out_writes_a_page_per_command_at_every_depth() {
        let dir = std::env::temp_dir().join(format!("sluice-man-{}", std::process::id()));
        let pages = man_pages(crate::Cli::command(), &dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for page in [
            "sluice.1",
            "sluice-ctl.1",
            "sluice-ctl-rollout-watch.1",
            "sluice-man.1",
        ] {
            assert!(pages.iter().any(|p| p == page), "{page} not in {pages:?}");
        }
    }
}
