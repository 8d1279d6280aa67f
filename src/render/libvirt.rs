//! libvirt: `<interface type='ethernet'>` elements for pre-made TAPs.

use super::nic::{attached_nics, Nic};
use super::RenderError;
use crate::model::Description;

/// Text form: one `<interface>` element per NIC, one per line, for the
/// domain XML's `<devices>` or `virsh attach-device`.
pub(crate) fn render_libvirt(desc: &Description) -> Result<String, RenderError> {
    let mut text = String::new();
    for nic in attached_nics(desc)? {
        nic.opened_by_name(
            "libvirt's <target dev= managed='no'/>",
            "libvirt opens an unmanaged macvtap as /dev/tap<ifindex> of its own netns, which is not the pod's: attach with --mode tc or --mode bridge",
        )?;
        nic.check_multi_queue_agreement()?;
        text.push_str(&interface_element(&nic));
        text.push('\n');
    }
    Ok(text)
}

/// `managed='no'` makes libvirt use the TAP as it is and leave it in place.
fn interface_element(nic: &Nic<'_>) -> String {
    let mut xml = format!(
        "<interface type='ethernet'><mac address='{}'/><target dev='{}' managed='no'/>\
         <model type='virtio'/><mtu size='{}'/>",
        escape_xml(&nic.mac),
        escape_xml(&nic.tap.name),
        nic.interface.mtu
    );
    if nic.tap.queues > 1 {
        xml.push_str(&format!("<driver queues='{}'/>", nic.tap.queues));
    }
    xml.push_str("</interface>");
    xml
}

/// Escape text for an XML attribute value or element content.
fn escape_xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '\'' => escaped.push_str("&apos;"),
            '"' => escaped.push_str("&quot;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixture;

    #[test]
    fn one_interface_element_per_nic() {
        let text = render_libvirt(&fixture::pod()).unwrap();
        assert_eq!(
            text,
            "<interface type='ethernet'><mac address='0a:58:0a:f4:01:05'/>\
             <target dev='tap0' managed='no'/><model type='virtio'/><mtu size='1400'/>\
             </interface>\n\
             <interface type='ethernet'><mac address='52:54:00:12:34:04'/>\
             <target dev='tap1' managed='no'/><model type='virtio'/><mtu size='9000'/>\
             <driver queues='4'/></interface>\n"
        );
    }

    #[test]
    fn driver_queues_only_for_multiqueue() {
        let text = render_libvirt(&fixture::single_ipv4()).unwrap();
        assert!(!text.contains("<driver"));
    }

    #[test]
    fn xml_special_characters_are_escaped() {
        assert_eq!(escape_xml("a&b<c>'d\""), "a&amp;b&lt;c&gt;&apos;d&quot;");
    }
}
