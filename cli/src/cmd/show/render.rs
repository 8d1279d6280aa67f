//! `podtap show` as text: a line per attachment, then a line per NIC.

use std::fmt::Write as _;

use super::{Shown, ShownNic};
use crate::terminal::printable;

/// Colour only on a terminal, and only when `NO_COLOR` is unset (no-color.org).
pub fn use_colour() -> bool {
    std::env::var_os("NO_COLOR").is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout())
}

fn paint(state: &str, text: &str, colour: bool) -> String {
    let code = match state {
        "ok" => "32",
        "drifted" => "33",
        _ => "31",
    };
    if colour {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// Every attachment and its NICs; "no attachments" when there are none.
pub fn text(shown: &[Shown], colour: bool) -> String {
    if shown.is_empty() {
        return "no attachments\n".into();
    }
    let mut out = String::new();
    for a in shown {
        let what = match &a.problem {
            Some(why) => format!("{}: {}", a.state, printable(why)),
            None => a.state.to_string(),
        };
        let _ = writeln!(
            out,
            "{}  netns {}  mode {}  {}",
            a.id,
            printable(a.netns.as_deref().unwrap_or("-")),
            a.mode.as_deref().unwrap_or("-"),
            paint(a.state, &what, colour)
        );
        for n in &a.nics {
            out.push_str(&nic_line(n, colour));
        }
    }
    out
}

/// `  eth0 -> tap_eth0 (tap 5) -> tc u32 redirect prio N -> vm MAC mtu 1450 queues 1 fd or name tap_eth0  STATE  rx N tx N`
fn nic_line(n: &ShownNic, colour: bool) -> String {
    let renamed = match &n.tap_now {
        Some(now) => format!(", now {}", printable(now)),
        None => String::new(),
    };
    let state = match n.state {
        "ok" => "ok".to_string(),
        s => format!("{s}: {}", printable(&n.problems.join("; "))),
    };
    let counters = match (n.rx_packets, n.tx_packets) {
        (Some(rx), Some(tx)) => format!("rx {rx} tx {tx}"),
        _ => "rx - tx -".into(),
    };
    format!(
        "  {} -> {} ({} {}{renamed}) -> {} -> vm {} mtu {} queues {} {} {}  {}  {}\n",
        printable(&n.pod),
        printable(&n.tap),
        n.tap_kind,
        n.tap_ifindex,
        printable(&n.wiring_detail),
        n.vm.mac.as_deref().unwrap_or("-"),
        n.vm.mtu,
        n.vm.queues,
        n.vm.handover,
        n.vm.open,
        paint(n.state, &state, colour),
        counters
    )
}
