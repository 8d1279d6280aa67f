//! libvirt: `<interface type='ethernet'>` elements for pre-made TAPs.
//!
//! What libvirt (checked with 9.0, QEMU driver) does with them: with
//! `managed='no'` it checks that the named device exists in its own netns (so
//! libvirtd must run in the pod netns, as KubeVirt's virt-launcher does),
//! opens it with `TUNSETIFF` once per queue (`<driver queues>`; more than one
//! asks for `IFF_MULTI_QUEUE`, which must match the TAP's or the kernel says
//! `EINVAL`), passes the fds to QEMU, and never renames, re-addresses or
//! deletes it. `TUNSETIFF` on an existing TAP needs `CAP_NET_ADMIN` or the
//! TAP's owner/group (`attach --tap-owner` for a libvirtd without it), and
//! replaces the TAP's feature flags with the opener's: for a virtio model
//! libvirt always asks for `IFF_VNET_HDR`.

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
        check_vnet_hdr(&nic)?;
        text.push_str(&interface_element(&nic));
        text.push('\n');
    }
    Ok(text)
}

/// libvirt opens a virtio NIC's TAP with `IFF_VNET_HDR`, and the kernel then
/// sets that flag on the TAP: refuse a TAP podtap made without it rather
/// than let libvirt change it behind the checkpoint's back.
fn check_vnet_hdr(nic: &Nic<'_>) -> Result<(), RenderError> {
    if nic.tap.vnet_hdr {
        return Ok(());
    }
    Err(RenderError::NoVnetHdr {
        interface: nic.interface.name.clone(),
        tap: nic.tap.name.clone(),
        format: "libvirt",
    })
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
    use crate::render::samples;

    #[test]
    fn one_interface_element_per_nic() {
        let text = render_libvirt(&samples::pod()).unwrap();
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
        let text = render_libvirt(&samples::single_ipv4()).unwrap();
        assert!(!text.contains("<driver"));
    }

    #[test]
    fn a_tap_without_vnet_hdr_is_refused() {
        let mut desc = samples::single_ipv4();
        for interface in &mut desc.interfaces {
            if let Some(tap) = interface.tap.as_mut() {
                tap.vnet_hdr = false;
            }
        }
        let err = render_libvirt(&desc).unwrap_err();
        assert!(matches!(err, RenderError::NoVnetHdr { .. }), "{err}");
        assert!(err.to_string().contains("--no-vnet-hdr"), "{err}");
    }

    #[test]
    fn xml_special_characters_are_escaped() {
        assert_eq!(escape_xml("a&b<c>'d\""), "a&amp;b&lt;c&gt;&apos;d&quot;");
    }
}
