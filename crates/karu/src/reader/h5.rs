//! HDF5 files read through a [`Reader`] with the pure-Rust `hdf5-reader` decoder (feature
//! `hdf5`): the reader is its storage, so parsing revisits blocks in the cache and a chunk
//! sweep rides the readahead.
//!
//! ```no_run
//! let client = karu::Client::new(&karu::Config::empty())?;
//! let object = karu::Locator::parse("https://example.com/data.h5")?;
//! let reader = karu::Reader::open(&client, &object, karu::ReaderOptions::default())?;
//! let file = karu::h5::open(&reader)?;
//! for object in karu::h5::list(&file)? {
//!     println!("{} {:?} {:?} {}", object.path, object.kind, object.shape, object.dtype);
//! }
//! let data = karu::h5::read(&file, "/data")?;
//! println!("{} bytes", data.bytes.len());
//! # Ok::<(), karu::Error>(())
//! ```

use std::collections::HashSet;
use std::sync::Arc;

pub use hdf5_reader;
use hdf5_reader::error::Error as H5Error;
use hdf5_reader::group::Group;
use hdf5_reader::{ByteOrder, Datatype, Hdf5File as File, Storage, StorageBuffer};

use super::Reader;
use crate::error::{Error, Result, Status};

impl Storage for Reader {
    fn len(&self) -> u64 {
        Reader::len(self)
    }

    /// Exactly `len` bytes, or an error (a karu error travels inside `Error::Io`, and
    /// [`open`], [`list`] and [`read`] give it back with its status).
    fn read_range(&self, offset: u64, len: usize) -> hdf5_reader::error::Result<StorageBuffer> {
        let data = self
            .read_at(offset, len as u64)
            .map_err(|e| H5Error::Io(std::io::Error::other(e)))?;
        if data.len() != len {
            return Err(H5Error::UnexpectedEof {
                offset,
                needed: len as u64,
                available: data.len() as u64,
            });
        }
        StorageBuffer::from_shared_owner(Arc::new(data), 0, len)
    }
}

/// A decoder error as a karu error: a karu error from the storage keeps its status; a
/// missing object is `NotFound`, an encoding the decoder lacks `Unsupported`, anything else
/// (a malformed file) `Invalid`.
fn error(e: H5Error) -> Error {
    let mut inner = &e;
    while let H5Error::Context { source, .. } = inner {
        inner = source;
    }
    use H5Error as H;
    let status = match inner {
        H::Io(io) => {
            if let Some(karu) = io.get_ref().and_then(|r| r.downcast_ref::<Error>()) {
                return karu.clone();
            }
            Status::Io
        }
        H::GroupNotFound(_) | H::DatasetNotFound(_) | H::AttributeNotFound(_) => Status::NotFound,
        H::UnsupportedSuperblockVersion(_)
        | H::UnsupportedObjectHeaderVersion(_)
        | H::UnsupportedBTreeVersion(_)
        | H::UnsupportedDatatypeClass(_)
        | H::UnsupportedLayoutClass(_)
        | H::UnsupportedLayoutVersion(_)
        | H::UnsupportedLinkType(_)
        | H::UnsupportedChunkIndexType(_)
        | H::UnsupportedFilter(_)
        | H::UnsupportedEncoding(_) => Status::Unsupported,
        _ => Status::Invalid,
    };
    Error::new(status, format!("HDF5: {e}"))
}

/// Opens the HDF5 file a reader holds (reads its superblock, usually from the first block
/// that open already fetched).
pub fn open(reader: &Reader) -> Result<File> {
    File::from_storage(Arc::new(reader.clone())).map_err(error)
}

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A group.
    Group,
    /// A dataset.
    Dataset,
}

/// One object of a file, as [`list`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Absolute path, `/` for the root group.
    pub path: String,
    /// Group or dataset.
    pub kind: Kind,
    /// A dataset's dimensions (empty for a scalar and for a group).
    pub shape: Vec<u64>,
    /// A dataset's element type, as [`dtype_name`] writes it (empty for a group).
    pub dtype: String,
}

/// Every object reachable from the root (a group reached twice is listed and walked once),
/// sorted by path.
pub fn list(file: &File) -> Result<Vec<Object>> {
    let mut out = vec![Object {
        path: "/".to_owned(),
        kind: Kind::Group,
        shape: Vec::new(),
        dtype: String::new(),
    }];
    let root = file.root_group().map_err(error)?;
    let mut seen = HashSet::from([root.address()]);
    let mut stack: Vec<(String, Group)> = vec![(String::new(), root)];
    while let Some((prefix, group)) = stack.pop() {
        let (groups, datasets) = group.members().map_err(error)?;
        for d in datasets {
            out.push(Object {
                path: format!("{prefix}/{}", d.name()),
                kind: Kind::Dataset,
                shape: d.shape().to_vec(),
                dtype: dtype_name(d.dtype()),
            });
        }
        for g in groups {
            let path = format!("{prefix}/{}", g.name());
            out.push(Object {
                path: path.clone(),
                kind: Kind::Group,
                shape: Vec::new(),
                dtype: String::new(),
            });
            if seen.insert(g.address()) {
                stack.push((path, g));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A dataset's content, as [`read`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Data {
    /// Dimensions (empty for a scalar).
    pub shape: Vec<u64>,
    /// Element type, as [`dtype_name`] writes it.
    pub dtype: String,
    /// Every element in row-major order, numbers in native byte order (what h5py's
    /// `dset[()].tobytes()` gives).
    pub bytes: Vec<u8>,
}

/// Reads the whole dataset at `path`.
pub fn read(file: &File, path: &str) -> Result<Data> {
    let d = file.dataset(path).map_err(error)?;
    let bytes = d.read_native_bytes().map_err(error)?;
    Ok(Data {
        shape: d.shape().to_vec(),
        dtype: dtype_name(d.dtype()),
        bytes,
    })
}

/// An element type in NumPy's `dtype.str` notation for numbers read in native order
/// (`<f8`, `<i4`, `|u1`, `|S10`), and a short name for the others (`compound[24]`, ...).
pub fn dtype_name(t: &Datatype) -> String {
    let native = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let order = |size: u8| if size == 1 { '|' } else { native };
    match t {
        Datatype::FixedPoint { size, signed, .. } => {
            format!("{}{}{size}", order(*size), if *signed { 'i' } else { 'u' })
        }
        Datatype::FloatingPoint { size, .. } => format!("{}f{size}", order(*size)),
        Datatype::Bitfield { size, byte_order } => {
            let o = match byte_order {
                ByteOrder::LittleEndian => '<',
                ByteOrder::BigEndian => '>',
            };
            format!("{o}V{size}")
        }
        Datatype::String {
            size: hdf5_reader::StringSize::Fixed(n),
            ..
        } => format!("|S{n}"),
        Datatype::String { .. } | Datatype::VarLen { .. } => "vlen".to_owned(),
        Datatype::Compound { size, .. } => format!("compound[{size}]"),
        Datatype::Array { base, dims } => format!("{}{dims:?}", dtype_name(base)),
        Datatype::Enum { base, .. } => format!("enum({})", dtype_name(base)),
        Datatype::Opaque { size, .. } => format!("|V{size}"),
        Datatype::Reference { .. } => "reference".to_owned(),
    }
}
