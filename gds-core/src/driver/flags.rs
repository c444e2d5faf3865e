//! The bit fields of `CUfileDrvProps_t` as flag types: named constants (from
//! cufile.h's bit positions), `contains`, `|`, and a stable name per flag
//! for people (`Display`) and for machines (serialized as a list of names).
//!
//! Written out rather than taken from the `bitflags` crate: three small
//! types, no parsing, and bits a newer cuFile sets that we have no name for
//! must survive (they print and serialize as `bit_N`).

use std::fmt;

use cufile_sys::bindings::{CUfileDriverControlFlags, CUfileDriverStatusFlags, CUfileFeatureFlags};

macro_rules! flags {
    (
        $(#[$meta:meta])*
        $name:ident {
            $(
                $(#[$flag_meta:meta])*
                $flag:ident = $bit:expr, $label:literal;
            )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            $(
                $(#[$flag_meta])*
                pub const $flag: $name = $name(1 << $bit);
            )+

            /// Every named flag, with its name, in bit order.
            pub const NAMED: &'static [(&'static str, $name)] = &[$(($label, $name::$flag),)+];

            /// The flags of a raw bit field, unknown bits kept.
            pub const fn from_bits_retain(bits: u32) -> $name {
                $name(bits)
            }

            pub const fn bits(self) -> u32 {
                self.0
            }

            pub const fn empty() -> $name {
                $name(0)
            }

            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            /// The names of the flags set, then `bit_N` for each set bit
            /// without a name.
            pub fn names(self) -> Vec<std::borrow::Cow<'static, str>> {
                flag_names(self.0, Self::NAMED.iter().map(|(label, flag)| (*label, flag.0)))
            }
        }

        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({self})", stringify!($name))
            }
        }

        /// The names, comma-separated; `none` when empty.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                if self.is_empty() {
                    return f.write_str("none");
                }
                f.write_str(&self.names().join(", "))
            }
        }

        /// A list of names: `["nfs", "nvme"]`.
        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.names())
            }
        }
    };
}

fn flag_names(
    bits: u32,
    named: impl Iterator<Item = (&'static str, u32)>,
) -> Vec<std::borrow::Cow<'static, str>> {
    let mut unnamed = bits;
    let mut names: Vec<std::borrow::Cow<'static, str>> = Vec::new();
    for (label, flag) in named {
        if bits & flag == flag {
            names.push(label.into());
            unnamed &= !flag;
        }
    }
    names.extend(
        (0..32)
            .filter(|bit| unnamed & (1 << bit) != 0)
            .map(|bit| format!("bit_{bit}").into()),
    );
    names
}

flags! {
    /// `dstatusflags`: the storage cuFile's driver can serve directly.
    StorageFlags {
        LUSTRE = CUfileDriverStatusFlags::CU_FILE_LUSTRE_SUPPORTED.0, "lustre";
        WEKAFS = CUfileDriverStatusFlags::CU_FILE_WEKAFS_SUPPORTED.0, "wekafs";
        NFS = CUfileDriverStatusFlags::CU_FILE_NFS_SUPPORTED.0, "nfs";
        GPFS = CUfileDriverStatusFlags::CU_FILE_GPFS_SUPPORTED.0, "gpfs";
        NVME = CUfileDriverStatusFlags::CU_FILE_NVME_SUPPORTED.0, "nvme";
        NVMEOF = CUfileDriverStatusFlags::CU_FILE_NVMEOF_SUPPORTED.0, "nvmeof";
        SCSI = CUfileDriverStatusFlags::CU_FILE_SCSI_SUPPORTED.0, "scsi";
        SCALEFLUX_CSD = CUfileDriverStatusFlags::CU_FILE_SCALEFLUX_CSD_SUPPORTED.0, "scaleflux_csd";
        NVMESH = CUfileDriverStatusFlags::CU_FILE_NVMESH_SUPPORTED.0, "nvmesh";
        BEEGFS = CUfileDriverStatusFlags::CU_FILE_BEEGFS_SUPPORTED.0, "beegfs";
        /// NVMe through PCI P2PDMA, as libcufile 1.15 reports it (later
        /// versions use [`FeatureFlags::P2P`]).
        NVME_P2P = CUfileDriverStatusFlags::CU_FILE_NVME_P2P_SUPPORTED.0, "nvme_p2p";
        SCATEFS = CUfileDriverStatusFlags::CU_FILE_SCATEFS_SUPPORTED.0, "scatefs";
        VIRTIOFS = CUfileDriverStatusFlags::CU_FILE_VIRTIOFS_SUPPORTED.0, "virtiofs";
        PANFS = CUfileDriverStatusFlags::CU_FILE_PANFS_SUPPORTED.0, "panfs";
    }
}

flags! {
    /// `dcontrolflags`: how the driver runs (`properties.*` of cufile.json).
    ControlFlags {
        USE_POLL_MODE = CUfileDriverControlFlags::CU_FILE_USE_POLL_MODE.0, "use_poll_mode";
        /// cuFile may fall back to its own compatibility mode.
        ALLOW_COMPAT_MODE = CUfileDriverControlFlags::CU_FILE_ALLOW_COMPAT_MODE.0, "allow_compat_mode";
        POSIX_IO_MODE = CUfileDriverControlFlags::CU_FILE_POSIX_IO_MODE.0, "posix_io_mode";
        FALLBACK_IO_MODE = CUfileDriverControlFlags::CU_FILE_FALLBACK_IO_MODE.0, "fallback_io_mode";
    }
}

flags! {
    /// `fflags`: the features this driver supports.
    FeatureFlags {
        DYNAMIC_ROUTING = CUfileFeatureFlags::CU_FILE_DYN_ROUTING_SUPPORTED.0, "dynamic_routing";
        BATCH_IO = CUfileFeatureFlags::CU_FILE_BATCH_IO_SUPPORTED.0, "batch_io";
        STREAMS = CUfileFeatureFlags::CU_FILE_STREAMS_SUPPORTED.0, "streams";
        PARALLEL_IO = CUfileFeatureFlags::CU_FILE_PARALLEL_IO_SUPPORTED.0, "parallel_io";
        /// PCI P2PDMA (libcufile 1.19+).
        P2P = CUfileFeatureFlags::CU_FILE_P2P_SUPPORTED.0, "p2p";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_have_cufile_h_positions_and_stable_names() {
        assert_eq!(StorageFlags::NFS.bits(), 1 << 2);
        assert_eq!(StorageFlags::NVME_P2P.bits(), 1 << 11);
        assert_eq!(ControlFlags::ALLOW_COMPAT_MODE.bits(), 1 << 1);
        assert_eq!(ControlFlags::FALLBACK_IO_MODE.bits(), 1 << 4);
        assert_eq!(FeatureFlags::P2P.bits(), 1 << 4);
        let storage = StorageFlags::NVME | StorageFlags::NFS;
        assert!(storage.contains(StorageFlags::NFS));
        assert!(!storage.contains(StorageFlags::NFS | StorageFlags::GPFS));
        assert_eq!(storage.to_string(), "nfs, nvme");
        assert_eq!(
            serde_json::to_value(storage).unwrap(),
            serde_json::json!(["nfs", "nvme"])
        );
        assert_eq!(StorageFlags::empty().to_string(), "none");
        assert_eq!(format!("{:?}", FeatureFlags::P2P), "FeatureFlags(p2p)");
        // Every name is distinct, and every constant is one bit.
        for named in [
            StorageFlags::NAMED
                .iter()
                .map(|(n, f)| (*n, f.bits()))
                .collect::<Vec<_>>(),
            ControlFlags::NAMED
                .iter()
                .map(|(n, f)| (*n, f.bits()))
                .collect(),
            FeatureFlags::NAMED
                .iter()
                .map(|(n, f)| (*n, f.bits()))
                .collect(),
        ] {
            for (i, (name, bits)) in named.iter().enumerate() {
                assert_eq!(bits.count_ones(), 1, "{name}");
                assert!(named[i + 1..].iter().all(|(n, b)| n != name && b != bits));
            }
        }
    }

    #[test]
    fn unknown_bits_survive_as_bit_n() {
        let flags = ControlFlags::from_bits_retain((1 << 1) | (1 << 3) | (1 << 31));
        assert!(flags.contains(ControlFlags::ALLOW_COMPAT_MODE));
        assert_eq!(flags.bits(), (1 << 1) | (1 << 3) | (1 << 31));
        assert_eq!(flags.to_string(), "allow_compat_mode, bit_3, bit_31");
        assert_eq!(
            serde_json::to_value(flags).unwrap(),
            serde_json::json!(["allow_compat_mode", "bit_3", "bit_31"])
        );
    }
}
