//! `ilnp-docgen OUT_DIR`: writes the man pages and shell completions of ilnpd and
//! ilnpctl, rendered from the clap definitions the binaries parse with
//! (`ilnpd::cli::Args`, `ilnpctl::cli::Cli`), so they cannot drift from `--help`:
//!
//! ```text
//! OUT_DIR/man/ilnpd.8  OUT_DIR/man/ilnpctl.8  (and ilnpctl-<subcommand>.8)
//! OUT_DIR/bash/ilnpd  OUT_DIR/zsh/_ilnpd  OUT_DIR/fish/ilnpd.fish  (and ilnpctl's)
//! ```
//!
//! (the names bash-completion, zsh and fish look up by command name)
//!
//! scripts/package.sh runs it before cargo-deb, which installs the files
//! (crates/ilnpd/Cargo.toml, `[package.metadata.deb]`).

use clap::{Command, CommandFactory};
use clap_complete::{generate, Shell};
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let out: PathBuf = match std::env::args_os().nth(1) {
        Some(p) => p.into(),
        None => {
            eprintln!("usage: ilnp-docgen OUT_DIR");
            std::process::exit(2);
        }
    };
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    for cmd in [ilnpd::cli::Args::command().name("ilnpd"), ilnpctl::cli::Cli::command().name("ilnpctl")] {
        // section 8: both are system administration commands (ilnpctl talks to a root daemon)
        write_man(&cmd, &man)?;
        let name = cmd.get_name().to_string();
        for (shell, dir, file) in [
            (Shell::Bash, "bash", name.clone()),
            (Shell::Zsh, "zsh", format!("_{name}")),
            (Shell::Fish, "fish", format!("{name}.fish")),
        ] {
            let dir = out.join(dir);
            std::fs::create_dir_all(&dir)?;
            let mut f = std::fs::File::create(dir.join(file))?;
            generate(shell, &mut cmd.clone(), name.clone(), &mut f);
        }
    }
    Ok(())
}

/// The command's page and one page per subcommand (`ilnpctl-ilcc.8`, ...), as git does.
fn write_man(cmd: &Command, dir: &Path) -> std::io::Result<()> {
    let mut cmd = cmd.clone();
    cmd.build();
    write_pages(&cmd, dir, cmd.get_name())
}

fn write_pages(cmd: &Command, dir: &Path, name: &str) -> std::io::Result<()> {
    // clap names are &'static str without its `string` feature (not turned on for the
    // whole workspace for one generator): a few leaked bytes in a short-lived process
    let page = cmd.clone().name(&*Box::leak(name.to_owned().into_boxed_str()));
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).section("8").render(&mut buf)?;
    std::fs::write(dir.join(format!("{name}.8")), buf)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, dir, &format!("{name}-{}", sub.get_name()))?;
    }
    Ok(())
}
