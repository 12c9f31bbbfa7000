//! `karu h5`: inspect and read HDF5 files (local or remote) through karu's block-cached,
//! version-pinned reader, in a few requests.

use clap::{Args, Subcommand};
use karu::h5::{self, Kind};
use karu::{Client, Error, Locator, Reader, ReaderOptions};

#[derive(Subcommand)]
pub enum H5Command {
    /// List every object: path, kind, shape and element type (tab-separated).
    Ls {
        /// Locator of the HDF5 file.
        uri: String,
        #[command(flatten)]
        reading: Reading,
    },
    /// Read a whole dataset; print its shape, element type and the SHA-256 of its bytes in
    /// native order (what h5py's `dset[()].tobytes()` gives).
    Read {
        /// Locator of the HDF5 file.
        uri: String,
        /// Dataset path, e.g. `/group/data`.
        dataset: String,
        #[command(flatten)]
        reading: Reading,
    },
}

#[derive(Args)]
pub struct Reading {
    /// Print the requests, bytes fetched and cache hits to stderr.
    #[arg(long)]
    stats: bool,
    /// Cache block size in bytes (the unit of requests).
    #[arg(long, default_value_t = 1 << 20)]
    block_size: u64,
    /// Cache budget in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    cache_bytes: u64,
}

impl Reading {
    fn open(&self, client: &Client, uri: &str) -> Result<Reader, Error> {
        let options = ReaderOptions::default()
            .block_size(self.block_size)
            .cache_bytes(self.cache_bytes);
        Reader::open(client, &Locator::parse(uri)?, options)
    }

    fn report(&self, reader: &Reader) {
        if self.stats {
            let s = reader.stats();
            eprintln!(
                "requests={} bytes_fetched={} hits={} misses={}",
                s.requests, s.bytes_fetched, s.hits, s.misses
            );
        }
    }
}

/// `(1000, 1000)`, `(7,)` or `()`, as NumPy writes shapes.
fn shape(dims: &[u64]) -> String {
    match dims {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

pub fn run(client: &Client, command: H5Command) -> Result<(), Error> {
    match command {
        H5Command::Ls { uri, reading } => {
            let reader = reading.open(client, &uri)?;
            let listed = h5::open(&reader).and_then(|file| h5::list(&file));
            reading.report(&reader);
            for o in listed? {
                match o.kind {
                    Kind::Group => println!("{}\tgroup", o.path),
                    Kind::Dataset => {
                        println!("{}\tdataset\t{}\t{}", o.path, shape(&o.shape), o.dtype)
                    }
                }
            }
            Ok(())
        }
        H5Command::Read {
            uri,
            dataset,
            reading,
        } => {
            let reader = reading.open(client, &uri)?;
            let data = h5::open(&reader).and_then(|file| h5::read(&file, &dataset));
            reading.report(&reader);
            let data = data?;
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &data.bytes);
            let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            println!("shape: {}", shape(&data.shape));
            println!("dtype: {}", data.dtype);
            println!("sha256: {hex}");
            Ok(())
        }
    }
}
