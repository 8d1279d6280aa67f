//! Logging to stderr: `PODTAP_LOG` sets the level (default: warnings),
//! `--log-format` / `PODTAP_LOG_FORMAT` the format (text, or one JSON object
//! per line for a node's log shipper).
//!
//! Errors are not logs: every door still prints its one `podtap: error: …`
//! line (or its CNI error object) whatever the format.

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    // The event's fields (`message`, `phase`, `interface`, ...) at the top,
    // the fields of its spans (`id`, `netns`) under `span` and `spans`.
    Json,
}

/// The environment variable for doors that take no flags (CNI plugin, OCI hook).
pub const FORMAT_ENV: &str = "PODTAP_LOG_FORMAT";

impl LogFormat {
    /// The format `PODTAP_LOG_FORMAT` names; text when unset or unknown.
    pub fn from_env() -> Self {
        match std::env::var(FORMAT_ENV) {
            Ok(v) if v.eq_ignore_ascii_case("json") => LogFormat::Json,
            _ => LogFormat::Text,
        }
    }
}

/// Install the stderr subscriber once, in `format`.
pub fn init(format: LogFormat) {
    // Without PODTAP_LOG a plain level: an EnvFilter costs a podtap process
    // 50 us to build, a twentieth of its start-up.
    let filter = tracing_subscriber::EnvFilter::try_from_env("PODTAP_LOG").ok();
    let base = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false);
    let _ = match (format, filter) {
        (LogFormat::Text, filter) => {
            let text = base
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .without_time();
            match filter {
                Some(f) => text.with_env_filter(f).try_init(),
                None => text.with_max_level(tracing::Level::WARN).try_init(),
            }
        }
        (LogFormat::Json, filter) => {
            // Shippers want a timestamp and flat event fields.
            let json = base
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(true);
            match filter {
                Some(f) => json.with_env_filter(f).try_init(),
                None => json.with_max_level(tracing::Level::WARN).try_init(),
            }
        }
    };
}
