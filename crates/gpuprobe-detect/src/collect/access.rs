//! The current user and whether it can open the GPU device nodes (`/dev/kfd`,
//! `/dev/dri/renderD*`, `/dev/nvidia*`). Decided from the nodes' owner, group and mode
//! bits against the uid and groups in `/proc/self/status`, without opening anything.

use std::os::unix::fs::MetadataExt;

use gpuprobe_model::Fingerprint;
use gpuprobe_model::Vendor;

use crate::merge::unreadable;
use crate::root::Root;

/// Effective uid, effective gid and supplementary groups from `/proc/self/status`.
struct Identity {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

fn identity(root: &Root) -> Option<Identity> {
    let status = root.read("/proc/self/status").ok()?;
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let uids = ids("Uid:");
    let gids = ids("Gid:");
    Some(Identity {
        uid: *uids.get(1).or(uids.first())?,
        gid: *gids.get(1).or(gids.first())?,
        groups: ids("Groups:"),
    })
}

/// Whether read+write access is granted by the mode bits (owner class first, then group,
/// then other, as the kernel checks them).
fn can_open(who: &Identity, owner: u32, group: u32, mode: u32) -> bool {
    if who.uid == 0 {
        return true;
    }
    let bits = if owner == who.uid {
        mode >> 6
    } else if group == who.gid || who.groups.contains(&group) {
        mode >> 3
    } else {
        mode
    };
    bits & 0o6 == 0o6
}

pub(super) fn collect(root: &Root, fp: &mut Fingerprint) {
    let who = identity(root);
    fp.host.uid = who.as_ref().map(|w| w.uid);
    let Some(who) = who else {
        unreadable(fp, "user id and groups (/proc/self/status)", "not readable");
        return;
    };
    let amd = fp.gpus.iter().any(|g| g.vendor == Vendor::Amd);
    let nvidia = fp.gpus.iter().any(|g| g.vendor == Vendor::Nvidia);
    let mut nodes: Vec<String> = Vec::new();
    if amd || root.exists("/dev/kfd") {
        nodes.push("/dev/kfd".to_owned());
    }
    for entry in root.list("/dev/dri").unwrap_or_default() {
        if entry.starts_with("renderD") {
            nodes.push(format!("/dev/dri/{entry}"));
        }
    }
    if amd && !nodes.iter().any(|n| n.starts_with("/dev/dri/")) {
        unreadable(
            fp,
            "GPU render nodes (/dev/dri/renderD*)",
            "missing: not passed into this container or no DRM driver",
        );
        nodes.push("/dev/dri/renderD*".to_owned());
    }
    if nvidia {
        nodes.push("/dev/nvidiactl".to_owned());
        for entry in root.list("/dev").unwrap_or_default() {
            if entry.starts_with("nvidia")
                && entry[6..].chars().all(|c| c.is_ascii_digit())
                && entry.len() > 6
            {
                nodes.push(format!("/dev/{entry}"));
            }
        }
    }
    for node in nodes {
        if node.ends_with('*') {
            fp.host.inaccessible_device_nodes.push(node);
            continue;
        }
        match std::fs::metadata(root.path(&node)) {
            Ok(meta) => {
                if !can_open(&who, meta.uid(), meta.gid(), meta.mode()) {
                    fp.host.inaccessible_device_nodes.push(node);
                }
            }
            Err(_) => {
                unreadable(
                    fp,
                    format!("device node {node}"),
                    "missing: not passed into this container, or the driver is not loaded",
                );
                fp.host.inaccessible_device_nodes.push(node);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_bits_follow_the_owner_group_other_order() {
        let user = Identity {
            uid: 1000,
            gid: 1000,
            groups: vec![44, 992],
        };
        assert!(can_open(&user, 0, 992, 0o660), "render group member");
        assert!(!can_open(&user, 0, 993, 0o660), "not in the group");
        assert!(can_open(&user, 0, 0, 0o666), "world read-write");
        assert!(
            !can_open(&user, 1000, 992, 0o066),
            "owner bits win even when group bits allow"
        );
        assert!(!can_open(&user, 0, 0, 0o644), "read-only for others");
        assert!(
            can_open(
                &Identity {
                    uid: 0,
                    gid: 0,
                    groups: vec![]
                },
                5,
                5,
                0
            ),
            "root"
        );
    }
}
