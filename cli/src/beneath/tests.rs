use std::os::unix::fs::symlink;

use super::*;

/// A temp dir of the test's own, removed at the end.
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!(
            "podtap-beneath-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(root: &Path, rel: &str, bytes: &[u8]) -> Result<PathBuf> {
    let dir = Dir::root(root, "output")?;
    let (parent, name) = dir.parent_of(Path::new(rel))?;
    parent.write_atomic(&name, bytes, 0o644)
}

#[test]
fn writes_beneath_making_directories() {
    let root = Tmp::new("ok");
    let at = write(&root.0, "a/b/c.json", b"one").unwrap();
    assert_eq!(at, root.0.join("a/b/c.json"));
    assert_eq!(std::fs::read(&at).unwrap(), b"one");
    write(&root.0, "a/b/c.json", b"two").unwrap();
    assert_eq!(std::fs::read(&at).unwrap(), b"two");
    let left: Vec<_> = std::fs::read_dir(root.0.join("a/b")).unwrap().collect();
    assert_eq!(left.len(), 1, "no temp file left");
}

#[test]
fn refuses_symlinks_and_escapes() {
    let root = Tmp::new("root");
    let outside = Tmp::new("outside");
    symlink(&outside.0, root.0.join("link")).unwrap();
    std::fs::write(root.0.join("file"), b"x").unwrap();
    let e = write(&root.0, "link/x.json", b"evil").unwrap_err();
    assert!(e.to_string().contains("is a symlink"), "{e}");
    assert_eq!(e.exit_code(), crate::error::exit::INVALID);
    let e = write(&root.0, "file/x.json", b"evil").unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    for bad in ["../x.json", "/etc/x.json", "a/../x", ""] {
        assert!(write(&root.0, bad, b"evil").is_err(), "{bad}");
    }
    // A symlink as the file itself is replaced, never written through.
    let target = outside.0.join("victim");
    std::fs::write(&target, b"untouched").unwrap();
    symlink(&target, root.0.join("out.json")).unwrap();
    write(&root.0, "out.json", b"mine").unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
    assert_eq!(std::fs::read(root.0.join("out.json")).unwrap(), b"mine");
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 1);
}

#[test]
fn the_fallback_refuses_symlinks_too() {
    // The path a kernel without openat2 takes, called directly.
    let root = Tmp::new("fallback");
    let outside = Tmp::new("fallback-out");
    symlink(&outside.0, root.0.join("link")).unwrap();
    std::fs::create_dir(root.0.join("d")).unwrap();
    let dir = Dir::root(&root.0, "output").unwrap();
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    assert_eq!(
        open_nofollow(&dir.fd, OsStr::new("link"), flags, Mode::empty()).unwrap_err(),
        Errno::ELOOP
    );
    assert!(open_nofollow(&dir.fd, OsStr::new("d"), flags, Mode::empty()).is_ok());
    let create = OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(0o644);
    assert_eq!(
        open_nofollow(&dir.fd, OsStr::new("link"), create, mode).unwrap_err(),
        Errno::EEXIST
    );
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 0);
}
