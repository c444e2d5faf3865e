//! Where `kvik write`, `kvik copy` and `kvik demo` put their bytes, and how
//! a destination is replaced so that it is always either its old content or
//! the whole new one.
//!
//! What DST is decides what happens (the kvik-cli README lists the same):
//!
//! | DST | what happens |
//! |---|---|
//! | missing | a new file, mode `0666 & ~umask`, appears only when complete |
//! | a regular file we may write | replaced only when the new one is complete; keeps mode, owner, group and extended attributes (ACLs) where permitted; other hard links keep the old content |
//! | a regular file we may not write | refused, as `cp` refuses it |
//! | a symlink to a file | written through: the file it points to is replaced as above, the link stays |
//! | a symlink to nothing, or a loop | refused |
//! | a character device (`/dev/null`) | written into, in place, at offsets from 0, as `dd` does; refused if it cannot take writes at offsets (a terminal) |
//! | a block device, FIFO or socket | refused, never opened |
//! | a directory | refused (`copy` copies into it instead) |
//!
//! The new file is written through a descriptor only: an unnamed file
//! (`O_TMPFILE`) in DST's directory, linked into place when complete
//! (`linkat` through `/proc/self/fd/N`; over an existing file, to a fresh
//! name and then `renameat` over DST). Where the filesystem has no
//! `O_TMPFILE` (or `KVIK_NO_TMPFILE=1`), a named temporary
//! `.NAME.kvik-RANDOM.tmp` created with `O_CREAT | O_EXCL | O_NOFOLLOW`,
//! mode 0600, removed on failure and on the catchable signals that end the
//! process ([`crate::signals`]). No name is ever reopened: a planted
//! symlink at a temporary name cannot redirect the write.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use kvik_policy::{FileHandle, Settings};
use rustix::fs::{Access, AtFlags, FileType, Mode, OFlags, XattrFlags};

use crate::CliError;
use crate::signals::{self, Registration};

/// The environment variable that forces a named temporary file, for
/// filesystems whose `O_TMPFILE` misbehaves (and for tests).
pub const NO_TMPFILE: &str = "KVIK_NO_TMPFILE";

/// Set when the file may be registered with cuFile: cuFile reopens a
/// registered file by the name its descriptor links to, which an
/// `O_TMPFILE` file does not have (`cuFileHandleRegister` then fails with
/// "failed to obtain new file descriptor": seen on the H200 with
/// libcufile 1.15), so the temporary gets an exclusive random name instead.
static CUFILE_NEEDS_A_NAME: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Named temporaries from now on: the output will be written from device
/// memory with cuFile allowed (compat mode OFF or AUTO).
pub fn name_temporaries_for_cufile() {
    CUFILE_NEEDS_A_NAME.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The longest file name Linux filesystems take (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// How far [`OutputFile::commit`] goes before returning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Data synced, then linked or renamed into place: atomic, but a crash
    /// soon after the command may still find the old file.
    Atomic,
    /// File and directory synced: the new file survives a crash once the
    /// command has returned.
    Fsync,
    /// A device written in place: nothing to sync or rename.
    InPlace,
}

impl Durability {
    pub fn from_flag(fsync: bool) -> Durability {
        if fsync {
            Durability::Fsync
        } else {
            Durability::Atomic
        }
    }
}

/// What a commit did, for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Committed {
    pub durability: Durability,
    /// Seconds spent in the syncs.
    pub sync_seconds: f64,
    /// `new`, `replaced` or `device`.
    pub destination: &'static str,
    /// The file written when DST is a symlink (the file it points to).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_optional_path"
    )]
    pub written_through: Option<PathBuf>,
    /// The new file's mode (octal), owner and group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    /// What of the old file could not be kept, and other things to know
    /// (also written to stderr).
    pub notes: Vec<String>,
}

fn serialize_optional_path<S: serde::Serializer>(
    path: &Option<PathBuf>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => kvik_policy::path_serde::serialize(p, s),
        None => s.serialize_none(),
    }
}

/// What DST was when the command started.
#[derive(Debug)]
enum Destination {
    New,
    Replace(Previous),
    Device,
}

/// The file being replaced: what the new one keeps of it.
#[derive(Debug)]
struct Previous {
    mode: u32,
    uid: u32,
    gid: u32,
    links: u64,
    /// Extended attributes (ACLs among them), or why they could not be read.
    xattrs: Result<Vec<(CString, Vec<u8>)>, String>,
}

/// How the new content is held until the commit.
#[derive(Debug)]
enum Temporary {
    /// `O_TMPFILE`: no name until linked into place.
    Unnamed,
    /// A named temporary in the directory, removed on failure and on
    /// signals (the registration is dropped before the directory closes:
    /// it is declared before `dir` in [`OutputFile`]).
    Named {
        name: CString,
        _registration: Registration,
    },
    /// The device itself.
    InPlace,
}

/// An output file: written through [`OutputFile::handle`], then put in
/// place by [`OutputFile::commit`]; dropped before the commit, it leaves
/// DST as it was.
#[derive(Debug)]
pub struct OutputFile {
    /// DST as named on the command line (for messages and reports).
    destination: PathBuf,
    /// The file replaced or created: DST, or what a symlink DST points to.
    target: PathBuf,
    kind: Destination,
    temporary: Temporary,
    file: File,
    /// The target's name in `dir`.
    name: CString,
    dir: OwnedFd,
    committed: bool,
}

impl OutputFile {
    /// The output of `kvik write` / `kvik copy`: DST as the table above
    /// says. `bytes`, when known, is refused up front if the filesystem
    /// cannot hold it. `source` is the source's (device, inode): DST must
    /// not be that file.
    pub fn create(
        destination: &Path,
        bytes: Option<u64>,
        source: Option<(u64, u64)>,
    ) -> Result<OutputFile, CliError> {
        let (mut dir_path, mut name) = split(destination)?;
        let mut dir = open_dir(&dir_path, destination)?;
        let mut target = destination.to_path_buf();
        let mut stat = stat_name(&dir, &name, &dir_path, destination)?;
        if let Some(st) = &stat
            && FileType::from_raw_mode(st.st_mode) == FileType::Symlink
        {
            target = follow_symlink(destination)?;
            (dir_path, name) = split(&target)?;
            dir = open_dir(&dir_path, destination)?;
            stat = stat_name(&dir, &name, &dir_path, destination)?;
            if stat
                .as_ref()
                .is_none_or(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
            {
                return Err(CliError::Failed(format!(
                    "{} changed while it was being resolved",
                    crate::output::escaped(&destination)
                )));
            }
        }
        if let (Some(st), Some(source)) = (&stat, source)
            && (st.st_dev, st.st_ino) == source
        {
            return Err(CliError::Usage(format!(
                "SRC and DST {} are the same file",
                crate::output::escaped(&destination)
            )));
        }
        let kind = match &stat {
            None => Destination::New,
            Some(st) => classify(st, destination)?,
        };
        let c_name = c_name(&name)?;
        let output = match kind {
            Destination::Device => {
                let file = open_device(&dir, &c_name, stat.as_ref(), destination)?;
                OutputFile {
                    destination: destination.to_path_buf(),
                    target,
                    kind,
                    temporary: Temporary::InPlace,
                    file,
                    name: c_name,
                    dir,
                    committed: false,
                }
            }
            Destination::New => Self::temporary(destination, target, kind, dir, c_name)?,
            Destination::Replace(mut previous) => {
                // As cp: a file we may not write is not replaced, though
                // the directory would let us rename over it.
                rustix::fs::accessat(&dir, &c_name, Access::WRITE_OK, AtFlags::EACCESS).map_err(
                    |e| {
                        request_or_failure(
                            e,
                            format!(
                                "{dst} (mode {:04o}) is not writable: {} ({dst} is unchanged)",
                                previous.mode & 0o7777,
                                io::Error::from(e),
                                dst = crate::output::escaped(&destination),
                            ),
                        )
                    },
                )?;
                previous.xattrs = read_xattrs(&dir, &c_name);
                Self::temporary(
                    destination,
                    target,
                    Destination::Replace(previous),
                    dir,
                    c_name,
                )?
            }
        };
        if let (Some(bytes), false) = (bytes, matches!(output.kind, Destination::Device)) {
            let dir = output.dir.as_fd();
            ensure_space(dir, bytes, destination).map_err(|e| output.failed(e))?;
        }
        Ok(output)
    }

    /// A scratch file in `dir` (`kvik demo`): never an existing file, never
    /// through a symlink; it has no name unless [`OutputFile::commit`] links
    /// it as `name`.
    pub fn scratch(dir_path: &Path, name: &str, bytes: u64) -> Result<OutputFile, CliError> {
        let destination = dir_path.join(name);
        let dir = open_dir(dir_path, &destination)?;
        ensure_space(dir.as_fd(), bytes, &destination)?;
        let c_name = c_name(OsStr::new(name))?;
        Self::temporary(
            &destination,
            destination.clone(),
            Destination::New,
            dir,
            c_name,
        )
    }

    /// Create the temporary file: unnamed where the filesystem can, else
    /// named, exclusively, with an unpredictable name.
    fn temporary(
        destination: &Path,
        target: PathBuf,
        kind: Destination,
        dir: OwnedFd,
        name: CString,
    ) -> Result<OutputFile, CliError> {
        let unchanged = |e: CliError| annotate(e, &kind, destination);
        let create_error = |e| {
            unchanged(request_or_failure(
                e,
                format!(
                    "cannot create a file in {} (for {}): {}",
                    crate::output::escaped(&parent_dir(&target)),
                    crate::output::escaped(&destination),
                    crate::input::explain(&parent_dir(&target), &io::Error::from(e))
                ),
            ))
        };
        let forced = std::env::var_os(NO_TMPFILE).is_some_and(|v| v != "0")
            || CUFILE_NEEDS_A_NAME.load(std::sync::atomic::Ordering::Relaxed);
        let unnamed = if forced {
            None
        } else {
            open_unnamed(&dir).map_err(create_error)?
        };
        let (file, temporary) = match unnamed {
            Some(file) => (file, Temporary::Unnamed),
            None => {
                let flags = OFlags::CREATE
                    | OFlags::EXCL
                    | OFlags::NOFOLLOW
                    | OFlags::RDWR
                    | OFlags::CLOEXEC;
                let created = with_fresh_name(&dir, name.as_bytes(), |tmp| {
                    rustix::fs::openat(&dir, tmp, flags, Mode::from_raw_mode(0o600))
                })
                .map_err(create_error)?;
                let (fd, tmp, registration) = created;
                (
                    File::from(fd),
                    Temporary::Named {
                        name: tmp,
                        _registration: registration,
                    },
                )
            }
        };
        Ok(OutputFile {
            destination: destination.to_path_buf(),
            target,
            kind,
            temporary,
            file,
            name,
            dir,
            committed: false,
        })
    }

    /// A [`FileHandle`] on the output (mode `w`, or `w+` to read it back),
    /// reporting DST's name.
    pub fn handle(&self, mode: &str, settings: &Settings) -> Result<FileHandle, CliError> {
        let file = self.file.try_clone().map_err(|e| {
            self.failed(CliError::Failed(format!(
                "dup of the output file: {e} (for {})",
                crate::output::escaped(&self.destination)
            )))
        })?;
        FileHandle::from_file(file, &self.destination, mode, settings)
            .map_err(|e| self.failed(CliError::Policy(e)))
    }

    /// The output file's descriptor (for page-cache residency).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// `e`, with what it means for DST: before the commit, a file is
    /// unchanged (or was not created); a device may have taken some bytes.
    pub fn failed(&self, e: CliError) -> CliError {
        if self.committed {
            return e;
        }
        annotate(e, &self.kind, &self.destination)
    }

    /// Give the new file the old one's metadata, sync it, and put it in
    /// place (with [`Durability::Fsync`], durably). Every failure before
    /// the new file is in place leaves DST as it was.
    pub fn commit(
        &mut self,
        file: &FileHandle,
        durability: Durability,
    ) -> Result<Committed, CliError> {
        let mut committed = Committed {
            durability,
            sync_seconds: 0.0,
            destination: match self.kind {
                Destination::New => "new",
                Destination::Replace(_) => "replaced",
                Destination::Device => "device",
            },
            written_through: (self.target != self.destination).then(|| self.target.clone()),
            mode: None,
            owner: None,
            group: None,
            notes: vec![],
        };
        if let Destination::Device = self.kind {
            committed.durability = Durability::InPlace;
            self.committed = true;
            return Ok(committed);
        }
        self.set_metadata(&mut committed)?;
        let start = Instant::now();
        match durability {
            Durability::Fsync => file.sync_all(),
            Durability::Atomic | Durability::InPlace => file.sync_data(),
        }?;
        committed.sync_seconds = start.elapsed().as_secs_f64();
        self.put_in_place()?;
        self.committed = true;
        if durability == Durability::Fsync {
            let start = Instant::now();
            rustix::fs::fsync(&self.dir).map_err(|e| {
                CliError::Failed(format!(
                    "{} has the new content, but syncing its directory {} failed: {} (the \
                     change may not survive a crash)",
                    crate::output::escaped(&self.destination),
                    parent_dir(&self.target).display(),
                    io::Error::from(e)
                ))
            })?;
            committed.sync_seconds += start.elapsed().as_secs_f64();
        }
        for note in &committed.notes {
            crate::report::note(note);
        }
        Ok(committed)
    }

    /// Owner, group, extended attributes and mode of the old file (or the
    /// mode a new file gets), on the descriptor. What cannot be kept is a
    /// note; a mode that cannot be set is a failure (DST unchanged).
    fn set_metadata(&self, committed: &mut Committed) -> Result<(), CliError> {
        let dst = crate::output::escaped(&self.destination);
        let mode = match &self.kind {
            Destination::Replace(previous) => {
                let mut mode = previous.mode & 0o7777;
                let uid = rustix::fs::Uid::from_raw(previous.uid);
                let gid = rustix::fs::Gid::from_raw(previous.gid);
                if let Err(e) = rustix::fs::fchown(&self.file, Some(uid), Some(gid)) {
                    // Not permitted to give the file away: keep the group
                    // if we are in it, and never keep set-ID bits for an
                    // owner or group that is no longer the file's.
                    let group_kept = rustix::fs::fchown(&self.file, None, Some(gid)).is_ok();
                    mode &= if group_kept { !0o4000 } else { !0o6000 };
                    committed.notes.push(format!(
                        "{dst}: owner {} not kept{} ({}): the new file is owned by uid {}",
                        previous.uid,
                        if group_kept {
                            String::new()
                        } else {
                            format!(", group {} not kept", previous.gid)
                        },
                        io::Error::from(e),
                        rustix::process::geteuid().as_raw(),
                    ));
                }
                match &previous.xattrs {
                    Ok(xattrs) => {
                        for (name, value) in xattrs {
                            if let Err(e) =
                                rustix::fs::fsetxattr(&self.file, name, value, XattrFlags::empty())
                            {
                                committed.notes.push(format!(
                                    "{dst}: extended attribute {} not kept ({})",
                                    name.to_string_lossy(),
                                    io::Error::from(e)
                                ));
                            }
                        }
                    }
                    Err(why) => committed
                        .notes
                        .push(format!("{dst}: extended attributes not kept ({why})")),
                }
                if previous.links > 1 {
                    committed.notes.push(format!(
                        "{dst} had {} hard links: it is a new file now, and the other names \
                         keep the old content",
                        previous.links
                    ));
                }
                mode
            }
            _ => 0o666 & !umask(),
        };
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode)).map_err(|e| {
            CliError::Failed(format!(
                "cannot set mode {mode:o} on the new {dst}: {} ({})",
                io::Error::from(e),
                self.unchanged_note()
            ))
        })?;
        let st = rustix::fs::fstat(&self.file).ok();
        committed.mode = Some(format!("{mode:04o}"));
        committed.owner = st.map(|s| s.st_uid);
        committed.group = st.map(|s| s.st_gid);
        Ok(())
    }

    fn unchanged_note(&self) -> String {
        match self.kind {
            Destination::New => format!(
                "{} was not created",
                crate::output::escaped(&self.destination)
            ),
            _ => format!("{} is unchanged", crate::output::escaped(&self.destination)),
        }
    }

    /// Link or rename the complete file to its name.
    fn put_in_place(&mut self) -> Result<(), CliError> {
        let fail = |what: String, e: rustix::io::Errno| {
            CliError::Failed(format!(
                "{what} {}: {} ({})",
                crate::output::escaped(&self.target),
                io::Error::from(e),
                self.unchanged_note()
            ))
        };
        match &self.temporary {
            Temporary::InPlace => Ok(()),
            Temporary::Named { name, .. } => {
                rustix::fs::renameat(&self.dir, name, &self.dir, &self.name)
                    .map_err(|e| fail(format!("cannot rename {} to", name.to_string_lossy()), e))?;
                // Renamed: nothing to remove any more.
                self.temporary = Temporary::Unnamed;
                Ok(())
            }
            Temporary::Unnamed => {
                if let Destination::New = self.kind {
                    // linkat never replaces a name, so a file that appeared
                    // at DST meanwhile (another writer) is replaced below.
                    match self.link_to(&self.name) {
                        Err(rustix::io::Errno::EXIST) => {}
                        other => return other.map_err(|e| fail("cannot link".into(), e)),
                    }
                }
                // linkat cannot replace DST: link to a fresh name (a named
                // temporary, for an instant), then rename over DST.
                let (name, _registration) = self.link_to_fresh_name()?;
                rustix::fs::renameat(&self.dir, &name, &self.dir, &self.name).map_err(|e| {
                    let _ = rustix::fs::unlinkat(&self.dir, &name, AtFlags::empty());
                    fail(format!("cannot rename {} to", name.to_string_lossy()), e)
                })
            }
        }
    }

    /// Give the unnamed file the name `name` (never replacing one).
    fn link_to(&self, name: &CStr) -> Result<(), rustix::io::Errno> {
        rustix::fs::linkat(
            rustix::fs::CWD,
            proc_fd(&self.file),
            &self.dir,
            name,
            AtFlags::SYMLINK_FOLLOW,
        )
    }

    /// Link the unnamed file to a fresh temporary name, registered for
    /// removal on signals.
    fn link_to_fresh_name(&self) -> Result<(CString, Registration), CliError> {
        with_fresh_name(&self.dir, self.name.as_bytes(), |tmp| self.link_to(tmp))
            .map(|((), name, registration)| (name, registration))
            .map_err(|e| {
                request_or_failure(
                    e,
                    format!(
                        "cannot link the new {} into {}: {} ({})",
                        crate::output::escaped(&self.destination),
                        parent_dir(&self.target).display(),
                        io::Error::from(e),
                        self.unchanged_note()
                    ),
                )
            })
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Temporary::Named { name, .. } = &self.temporary
            && !self.committed
        {
            let _ = rustix::fs::unlinkat(&self.dir, name, AtFlags::empty());
        }
    }
}

/// The readable report's lines on how DST was put in place.
pub fn summary(committed: &Committed) -> String {
    let durable = match committed.durability {
        Durability::Fsync => format!(
            "yes: file and directory synced ({:.4} s)",
            committed.sync_seconds
        ),
        Durability::Atomic => format!(
            "data synced, then put in place ({:.4} s; --fsync to wait for the rename too)",
            committed.sync_seconds
        ),
        Durability::InPlace => "not applicable: a device, written in place".to_string(),
    };
    let mut text = format!("  durable      {durable}\n");
    if let Some(target) = &committed.written_through {
        text += &format!(
            "  through      a symlink, to {}\n",
            crate::output::escaped(&target)
        );
    }
    if let (Some(mode), Some(owner), Some(group)) =
        (&committed.mode, committed.owner, committed.group)
    {
        text += &format!(
            "  file         {}, mode {mode}, uid {owner}, gid {group}\n",
            committed.destination
        );
    }
    text
}

/// `e`, with what it means for a DST of this kind that was not committed.
fn annotate(e: CliError, kind: &Destination, destination: &Path) -> CliError {
    let dst = crate::output::escaped(&destination);
    let note = match kind {
        Destination::New => format!("{dst} was not created"),
        Destination::Replace(_) => format!("{dst} is unchanged"),
        Destination::Device => {
            format!("{dst} is a device written in place: some of the bytes may have reached it")
        }
    };
    e.with_note(note)
}

/// An `O_TMPFILE` file in `dir`, if the filesystem has them and
/// `/proc/self/fd` can link it into place; `None` otherwise.
fn open_unnamed(dir: &OwnedFd) -> Result<Option<File>, rustix::io::Errno> {
    use rustix::io::Errno;
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, c".", flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        // No O_TMPFILE here (EOPNOTSUPP; EISDIR or EINVAL from kernels and
        // filesystems that predate it).
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => return Ok(None),
        Err(e) => return Err(e),
    };
    // linkat needs the file's /proc/self/fd entry (no /proc: named).
    let ours = rustix::fs::fstat(&fd).ok();
    let linked = rustix::fs::statat(rustix::fs::CWD, proc_fd(&fd), AtFlags::empty()).ok();
    match (ours, linked) {
        (Some(a), Some(b)) if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) => {
            Ok(Some(File::from(fd)))
        }
        _ => Ok(None),
    }
}

/// Run `create` with a fresh temporary name in `dir` (named after `stem`)
/// until it does not find the name taken. The name is registered for
/// removal on signals before `create` runs, so that no instant exists
/// where the file does and a signal would leave it; were the name taken
/// (EEXIST: 64 random bits make it unheard of), a signal in that instant
/// could remove a file that is not ours.
fn with_fresh_name<T>(
    dir: &OwnedFd,
    stem: &[u8],
    mut create: impl FnMut(&CStr) -> Result<T, rustix::io::Errno>,
) -> Result<(T, CString, Registration), rustix::io::Errno> {
    for _ in 0..16 {
        let name = temporary_name(stem)?;
        // SAFETY: `dir` outlives the registration: the callers keep both
        // in one `OutputFile` (the registration dropped first) or drop the
        // registration before returning.
        let registration = unsafe { signals::register(dir.as_fd(), &name) };
        match create(&name) {
            Ok(made) => return Ok((made, name, registration)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(rustix::io::Errno::EXIST)
}

/// `/proc/self/fd/N` of `fd`.
fn proc_fd(fd: &impl std::os::fd::AsRawFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

/// `.STEM.kvik-RANDOM.tmp`, at most `NAME_MAX` bytes (a long stem is cut,
/// at a character boundary where it is UTF-8).
fn temporary_name(stem: &[u8]) -> Result<CString, rustix::io::Errno> {
    let mut random = [0u8; 8];
    rustix::rand::getrandom(&mut random[..], rustix::rand::GetRandomFlags::empty())?;
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let suffix = format!(".kvik-{suffix}.tmp");
    let room = NAME_MAX - 1 - suffix.len();
    let mut cut = stem.len().min(room);
    while cut > 0 && cut < stem.len() && stem[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    let mut name = Vec::with_capacity(NAME_MAX);
    name.push(b'.');
    name.extend_from_slice(&stem[..cut]);
    name.extend_from_slice(suffix.as_bytes());
    Ok(CString::new(name).expect("a file name has no NUL"))
}

/// The process's umask (set and restored: no thread of ours creates files
/// meanwhile).
fn umask() -> u32 {
    let old = rustix::process::umask(Mode::from_raw_mode(0o077));
    rustix::process::umask(old);
    old.bits()
}

/// DST's directory and name; refuses paths that name no file (`/`, `..`,
/// `dir/`).
fn split(path: &Path) -> Result<(PathBuf, std::ffi::OsString), CliError> {
    let bytes = path.as_os_str().as_bytes();
    let name = path.file_name().filter(|_| !bytes.ends_with(b"/"));
    match name {
        Some(name) => Ok((parent_dir(path), name.to_os_string())),
        None => Err(CliError::Usage(format!(
            "{} does not name a file",
            crate::output::escaped(&path)
        ))),
    }
}

fn c_name(name: &OsStr) -> Result<CString, CliError> {
    CString::new(name.as_bytes())
        .map_err(|_| CliError::Usage(format!("{} contains a NUL byte", Path::new(name).display())))
}

/// The directory a path's file is in (`.` for a bare name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A failed system call on the destination, coded by the one rule
/// (`error::errno_code`).
fn request_or_failure(e: rustix::io::Errno, message: String) -> CliError {
    if crate::error::errno_code(Some(e.raw_os_error())) == crate::error::INVALID {
        CliError::Usage(message)
    } else {
        CliError::Failed(message)
    }
}

/// Open DST's directory (following symlinks in its path, as the user
/// named it); every later step works relative to it.
fn open_dir(dir: &Path, destination: &Path) -> Result<OwnedFd, CliError> {
    // Say what is really wrong (a missing ancestor, a file where a
    // directory should be, a loop) before trying.
    crate::input::directory_for(dir, destination)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::open(dir, flags, Mode::empty()).map_err(|e| {
        CliError::io("directory", dir, io::Error::from(e))
            .with_note(format!("for {}", crate::output::escaped(destination)))
    })
}

/// `lstat` of `name` in `dir`; `None` when there is no such file.
fn stat_name(
    dir: &OwnedFd,
    name: &OsStr,
    dir_path: &Path,
    destination: &Path,
) -> Result<Option<rustix::fs::Stat>, CliError> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(request_or_failure(
            e,
            format!(
                "cannot look at {} in {}: {}",
                crate::output::escaped(&destination),
                crate::output::escaped(&dir_path),
                io::Error::from(e)
            ),
        )),
    }
}

/// The file a symlink DST points to; refused when it points to nothing.
fn follow_symlink(destination: &Path) -> Result<PathBuf, CliError> {
    std::fs::canonicalize(destination).map_err(|e| {
        let pointed = std::fs::read_link(destination)
            .map(|p| crate::output::escaped(&p).to_string())
            .unwrap_or_else(|_| "?".into());
        let dst = crate::output::escaped(&destination);
        CliError::Usage(match e.raw_os_error() {
            Some(libc::ELOOP) => format!("{dst} is a symlink loop"),
            Some(libc::ENOENT) => format!(
                "{dst} is a symlink to {pointed}, which does not exist (kvik writes through a \
                 symlink only to an existing file)"
            ),
            _ => format!("{dst} is a symlink to {pointed}, which cannot be resolved: {e}"),
        })
    })
}

/// What an existing DST (not a symlink) means for the command.
fn classify(st: &rustix::fs::Stat, destination: &Path) -> Result<Destination, CliError> {
    let dst = crate::output::escaped(&destination);
    let refuse = |what: &str, why: &str| Err(CliError::Usage(format!("{dst} is {what}: {why}")));
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(Destination::Replace(Previous {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            links: st.st_nlink,
            xattrs: Ok(vec![]),
        })),
        FileType::CharacterDevice => Ok(Destination::Device),
        FileType::Directory => refuse("a directory", "name a file"),
        FileType::BlockDevice => refuse(
            "a block device",
            "kvik replaces files whole and cannot do that for a device (dd writes into devices)",
        ),
        FileType::Fifo => refuse(
            "a FIFO",
            "kvik writes files at offsets and cannot write into a FIFO (it is left as it is)",
        ),
        FileType::Socket => refuse("a socket", "kvik writes only files and character devices"),
        _ => refuse("not a file", "kvik writes only files and character devices"),
    }
}

/// Open a character-device DST for writing in place (no create, no
/// truncate), and check that it takes writes at offsets.
fn open_device(
    dir: &OwnedFd,
    name: &CStr,
    expected: Option<&rustix::fs::Stat>,
    destination: &Path,
) -> Result<File, CliError> {
    let dst = crate::output::escaped(&destination);
    // O_NONBLOCK: a device that would wait for a carrier does not hang
    // the open; cleared below.
    let flags =
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty())
        .map_err(|e| request_or_failure(e, format!("cannot open {dst}: {}", io::Error::from(e))))?;
    let st = rustix::fs::fstat(&fd).map_err(|e| CliError::Failed(format!("fstat {dst}: {e}")))?;
    if expected.is_none_or(|x| (x.st_dev, x.st_ino) != (st.st_dev, st.st_ino)) {
        return Err(CliError::Failed(format!(
            "{dst} changed while it was being opened"
        )));
    }
    rustix::fs::fcntl_setfl(&fd, OFlags::empty())
        .map_err(|e| CliError::Failed(format!("fcntl {dst}: {e}")))?;
    if rustix::fs::seek(&fd, rustix::fs::SeekFrom::Current(0)).is_err() {
        return Err(CliError::Usage(format!(
            "{dst} is a character device that does not take writes at offsets (kvik writes \
             through positional I/O)"
        )));
    }
    Ok(File::from(fd))
}

/// Every extended attribute of `name` in `dir` (ACLs are among them),
/// read through `/proc/self/fd/DIR/NAME` without following a symlink and
/// without opening the file (which may not be readable to us).
fn read_xattrs(dir: &OwnedFd, name: &CStr) -> Result<Vec<(CString, Vec<u8>)>, String> {
    let mut path = proc_fd(dir).into_bytes();
    path.push(b'/');
    path.extend_from_slice(name.to_bytes());
    let path = CString::new(path).expect("no NUL in a file name");
    let mut list = vec![0u8; 64 << 10];
    let len = match rustix::fs::llistxattr(&path, &mut list[..]) {
        Ok(len) => len,
        Err(rustix::io::Errno::NOTSUP) => 0,
        Err(e) => return Err(format!("listing them failed: {}", io::Error::from(e))),
    };
    let mut xattrs = vec![];
    for attr in list[..len].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let attr = CString::new(attr).expect("split at NUL");
        let mut value = vec![0u8; 64 << 10];
        let n = rustix::fs::lgetxattr(&path, &attr, &mut value[..]).map_err(|e| {
            format!(
                "reading {} failed: {}",
                attr.to_string_lossy(),
                io::Error::from(e)
            )
        })?;
        value.truncate(n);
        xattrs.push((attr, value));
    }
    Ok(xattrs)
}

/// Refuse early a write of `bytes` that cannot fit: `fstatvfs` of the
/// directory says fewer blocks are free (to anyone, root included) than the
/// file needs. Writing until ENOSPC would fill the filesystem for everyone
/// else first. Where `fstatvfs` fails, the write itself finds out.
pub fn ensure_space(
    dir: std::os::fd::BorrowedFd<'_>,
    bytes: u64,
    destination: &Path,
) -> Result<(), CliError> {
    // Filesystems that report no size at all (some FUSE and network ones)
    // are not judged.
    let Ok(st) = rustix::fs::fstatvfs(dir) else {
        return Ok(());
    };
    if st.f_blocks == 0 {
        return Ok(());
    }
    let free = st.f_bfree.saturating_mul(st.f_frsize);
    if bytes > free {
        return Err(CliError::Failed(format!(
            "{} needs {} but its filesystem has {} free",
            crate::output::escaped(&destination),
            kvik_policy::Size(bytes),
            crate::report::approximate(free)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_fit_name_max_and_differ() {
        let long = "é".repeat(127); // 254 bytes
        let a = temporary_name(long.as_bytes()).unwrap();
        let b = temporary_name(long.as_bytes()).unwrap();
        assert!(a.as_bytes().len() <= NAME_MAX, "{}", a.as_bytes().len());
        assert_ne!(a, b);
        // Cut at a character boundary: still UTF-8.
        assert!(a.to_str().is_ok(), "{a:?}");
        let short = temporary_name(b"x.bin").unwrap();
        let text = short.to_str().unwrap();
        assert!(
            text.starts_with(".x.bin.kvik-") && text.ends_with(".tmp"),
            "{text}"
        );
    }

    #[test]
    fn paths_that_name_no_file_are_refused() {
        for path in ["/", "..", "dir/", "a/.."] {
            assert!(split(Path::new(path)).is_err(), "{path}");
        }
        let (dir, name) = split(Path::new("f.bin")).unwrap();
        assert_eq!(
            (dir.as_path(), name.as_os_str()),
            (Path::new("."), OsStr::new("f.bin"))
        );
    }
}
