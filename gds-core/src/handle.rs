//! `CuFileHandle`: a file registered with cuFile, deregistered on drop.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use cufile_sys::bindings::{
    CUfileDescr_t, CUfileDescr_t__bindgen_ty_1, CUfileError_t, CUfileFileHandleType, CUfileHandle_t,
};
use cufile_sys::cufile_fn;

use crate::driver::Driver;
use crate::error::{Error, Result};
use crate::log::LogMark;

/// How to open a file for cuFile (always with O_DIRECT and O_CLOEXEC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub truncate: bool,
}

impl OpenFlags {
    pub const READ: OpenFlags = OpenFlags {
        read: true,
        write: false,
        create: false,
        truncate: false,
    };
    pub const READ_WRITE: OpenFlags = OpenFlags {
        read: true,
        write: true,
        create: false,
        truncate: false,
    };
    pub const CREATE: OpenFlags = OpenFlags {
        read: true,
        write: true,
        create: true,
        truncate: true,
    };
}

/// A file registered with cuFile. Holds the O_DIRECT descriptor and a
/// reference on the driver, so neither goes away while it exists.
#[derive(Debug)]
pub struct CuFileHandle {
    raw: RawHandle,
    file: File,
    path: PathBuf,
    driver: Driver,
}

/// The opaque `CUfileHandle_t`. cuFile's handles may be used from any
/// thread (KvikIO's tasks share one); the pointer is never dereferenced here.
#[derive(Debug)]
struct RawHandle(CUfileHandle_t);

// SAFETY: cuFile documents file handles as usable concurrently from several
// threads; we only pass the value back to cuFile.
unsafe impl Send for RawHandle {}
// SAFETY: as above.
unsafe impl Sync for RawHandle {}

impl CuFileHandle {
    /// Open `path` with O_DIRECT and register it.
    pub fn open(driver: &Driver, path: impl AsRef<Path>, flags: OpenFlags) -> Result<CuFileHandle> {
        let path = path.as_ref();
        let file = std::fs::OpenOptions::new()
            .read(flags.read)
            .write(flags.write)
            .create(flags.create)
            .truncate(flags.truncate)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| Error::Open {
                path: path.to_path_buf(),
                source,
            })?;
        CuFileHandle::register(driver, file, path)
    }

    /// Register an already open file (it should carry O_DIRECT: cuFile's
    /// direct path needs it, and 1.15 refuses descriptors without it).
    pub fn register(driver: &Driver, file: File, path: impl AsRef<Path>) -> Result<CuFileHandle> {
        let path = path.as_ref().to_path_buf();
        let lib = driver.library();
        let register = cufile_fn!(lib, cuFileHandleRegister)?;
        let mut descr = CUfileDescr_t {
            type_: CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
            handle: CUfileDescr_t__bindgen_ty_1 {
                fd: file.as_raw_fd(),
            },
            fs_ops: std::ptr::null(),
        };
        let mut raw: CUfileHandle_t = std::ptr::null_mut();
        let _open = driver.enter("cuFileHandleRegister")?;
        let mark = LogMark::new(driver.log());
        // SAFETY: the driver is open (held by `_open`); descr names a valid fd
        // that outlives the registration (owned by the handle).
        let status: CUfileError_t = unsafe { register(&mut raw, &mut descr) };
        if !status.is_success() {
            return Err(Error::CuFile {
                operation: "cuFileHandleRegister",
                status,
                path: Some(path),
                log: mark.excerpt(),
            });
        }
        Ok(CuFileHandle {
            raw: RawHandle(raw),
            file,
            path,
            driver: driver.clone(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The O_DIRECT descriptor cuFile reads through.
    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn driver(&self) -> &Driver {
        &self.driver
    }

    pub(crate) fn raw(&self) -> CUfileHandle_t {
        self.raw.0
    }
}

impl Drop for CuFileHandle {
    fn drop(&mut self) {
        // A driver shut down since has forgotten the handle.
        let Ok(_open) = self.driver.enter("cuFileHandleDeregister") else {
            return;
        };
        if let Ok(deregister) = cufile_fn!(self.driver.library(), cuFileHandleDeregister) {
            // SAFETY: deregisters the handle registered in `register`, once;
            // the fd is closed afterwards when `file` drops.
            unsafe { deregister(self.raw.0) };
        }
    }
}
