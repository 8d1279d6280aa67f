//! The command lines a runtime sends per pod, `podtap attach` and `podtap
//! detach` with plain `--flag value` (or `--flag=value`) options, read
//! without clap: building and running clap's parser cost each of those
//! processes about 0.07 ms here, 2% of an 8-interface attach.
//!
//! This is a subset of the grammar in `args.rs`, not a second grammar:
//! whatever it is not sure of (a help or version flag, an option it does
//! not know, a repeated option, a value clap would reject or a value that
//! starts with `-`, an empty or non-UTF-8 value, an environment default it
//! does not accept) makes [`parse`] return `None`, and clap parses the
//! command line as it always did, with its messages and exit codes. A test
//! checks that every command line this path takes, clap parses to the same
//! value.

use std::ffi::OsString;
use std::path::PathBuf;

use super::args::{AttachArgs, Cli, Command, DetachArgs, DEFAULT_QUEUES, MODES, TC_REDIRECTS};
use super::logging::{LogFormat, FORMAT_ENV};
use crate::doors::state_args::{StateArgs, STATE_DIR_ENV};
use crate::plan::TC_REDIRECT_ENV;

/// `args` (the program name first) as clap would parse it, when it is an
/// `attach` or `detach` this path is sure of; `env` reads the environment.
pub(super) fn parse(args: &[OsString], env: impl Fn(&str) -> Option<OsString>) -> Option<Cli> {
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str())
        .collect::<Option<_>>()?;
    let (command, rest) = words.split_first()?;
    let mut options = Options::read(rest)?;
    let log_format = match options.take("log-format") {
        Some(v) => log_format(v)?,
        None => match env_value(&env, FORMAT_ENV)? {
            Some(v) => log_format(&v)?,
            None => LogFormat::Text,
        },
    };
    let state = StateArgs {
        state_dir: match options.take("state-dir") {
            Some(v) => v.into(),
            None => env_value(&env, STATE_DIR_ENV)?
                .unwrap_or_else(|| crate::state::DEFAULT_STATE_DIR.into())
                .into(),
        },
    };
    let command = match *command {
        "attach" => Command::Attach(attach(&mut options, &env, state)?),
        "detach" => Command::Detach(DetachArgs {
            id: options.take("id")?.into(),
            force: options.flag("force")?,
            netns: options.take("netns").map(PathBuf::from),
            state,
        }),
        _ => return None,
    };
    options.all_taken().then_some(Cli {
        log_format,
        command,
    })
}

fn attach(
    options: &mut Options<'_>,
    env: &impl Fn(&str) -> Option<OsString>,
    state: StateArgs,
) -> Option<AttachArgs> {
    let mode = options.take("mode").unwrap_or(MODES[0]);
    let tc_redirect = match options.take("tc-redirect") {
        Some(v) => v.to_string(),
        None => env_value(env, TC_REDIRECT_ENV)?.unwrap_or_else(|| TC_REDIRECTS[0].into()),
    };
    let queues = match options.take("queues") {
        Some(v) if v.bytes().all(|b| b.is_ascii_digit()) => v.parse().ok()?,
        Some(_) => return None,
        None => DEFAULT_QUEUES,
    };
    let known = MODES.contains(&mode) && TC_REDIRECTS.contains(&tc_redirect.as_str());
    known.then_some(())?;
    Some(AttachArgs {
        netns: options.take("netns")?.into(),
        id: options.take("id")?.into(),
        mode: mode.into(),
        queues,
        no_vnet_hdr: options.flag("no-vnet-hdr")?,
        tc_redirect,
        tap_owner: options.take("tap-owner").map(String::from),
        interfaces: options
            .take("interfaces")
            .map(|v| v.split(',').map(String::from).collect()),
        dns_from: options.take("dns-from").map(PathBuf::from),
        state,
        output: options.take("output").map(PathBuf::from),
    })
}

/// An environment variable's value: `Some(None)` when unset, `None` (not
/// sure) when it is set but empty or not UTF-8.
fn env_value(env: &impl Fn(&str) -> Option<OsString>, name: &str) -> Option<Option<String>> {
    match env(name) {
        None => Some(None),
        Some(v) => v.into_string().ok().filter(|v| !v.is_empty()).map(Some),
    }
}

fn log_format(value: &str) -> Option<LogFormat> {
    match value {
        "text" => Some(LogFormat::Text),
        "json" => Some(LogFormat::Json),
        _ => None,
    }
}

/// The options of a command line, each given at most once.
struct Options<'a> {
    /// Name (without `--`) and value; `None` for a flag without a value.
    given: Vec<(&'a str, Option<&'a str>)>,
}

/// The options that take no value.
const FLAGS: [&str; 2] = ["no-vnet-hdr", "force"];

impl<'a> Options<'a> {
    /// Read `--name value`, `--name=value`, `-o value` and the flags; `None`
    /// for anything else, for a repeated name and for a value that is empty
    /// or starts with `-`.
    fn read(words: &[&'a str]) -> Option<Self> {
        let mut given: Vec<(&str, Option<&str>)> = Vec::new();
        let mut words = words.iter();
        while let Some(word) = words.next() {
            let (name, inline) = match word.strip_prefix("--") {
                Some(long) => match long.split_once('=') {
                    Some((name, value)) => (name, Some(value)),
                    None => (long, None),
                },
                None if *word == "-o" => ("output", None),
                None => return None,
            };
            let value = if FLAGS.contains(&name) {
                inline.is_none().then_some(None)?
            } else {
                Some(inline.or_else(|| words.next().copied())?)
            };
            let plain = value.is_none_or(|v| !v.is_empty() && !v.starts_with('-'));
            if !plain || name.is_empty() || given.iter().any(|(n, _)| *n == name) {
                return None;
            }
            given.push((name, value));
        }
        Some(Options { given })
    }

    /// The value of option `name`, if given (and takes it off the list).
    fn take(&mut self, name: &str) -> Option<&'a str> {
        let at = self
            .given
            .iter()
            .position(|(n, v)| *n == name && v.is_some())?;
        self.given.remove(at).1
    }

    /// Whether flag `name` was given; `None` if it was given with a value.
    fn flag(&mut self, name: &str) -> Option<bool> {
        match self.given.iter().position(|(n, _)| *n == name) {
            Some(at) => self.given.remove(at).1.is_none().then_some(true),
            None => Some(false),
        }
    }

    /// Whether every option was taken: one left is one this path does not know.
    fn all_taken(&self) -> bool {
        self.given.is_empty()
    }
}

#[cfg(test)]
#[path = "quick_tests.rs"]
mod tests;
