//! Where a snapshot's new objects go: a few are written loose, many are streamed into a
//! pack through libgit2's indexer (`Odb::packwriter`). A big first snapshot then writes no
//! loose file per object (creating 100,000 files is what made such snapshots slow here), and
//! the pack has no delta search (libgit2's packbuilder always does one).
//!
//! Also builds the trees of a whole index into the same sink, so a big snapshot's trees land
//! in the pack with its blobs.

use std::collections::HashSet;
use std::io::Write;

use git2::{ObjectType, Odb, OdbLookupFlags, Oid};
use sha1::{Digest, Sha1};

use super::Result;

/// Up to this many new objects are written loose; past it the sink packs everything.
const LOOSE_MAX: usize = 256;
/// A pack is written once this much compressed data is waiting (bounds memory).
pub(crate) const PACK_FLUSH_BYTES: usize = 64 << 20;

pub(crate) struct ObjectSink<'a, 'r> {
    odb: &'a Odb<'r>,
    /// Objects held back while there are few of them (written loose on flush).
    loose: Vec<(ObjectType, Vec<u8>)>,
    packing: bool,
    pack: PackStream,
    /// Ids added since the last flush (a pack must not hold one twice).
    added: HashSet<Oid>,
    /// How many objects were new (not already in the object store).
    pub written: usize,
}

impl<'a, 'r> ObjectSink<'a, 'r> {
    pub fn new(odb: &'a Odb<'r>) -> Self {
        ObjectSink {
            odb,
            loose: Vec::new(),
            packing: false,
            pack: PackStream::default(),
            added: HashSet::new(),
            written: 0,
        }
    }

    /// Adds an object unless the store (or this sink) has it already; returns its id. The
    /// object is readable only after `flush`.
    pub fn add(&mut self, kind: ObjectType, data: &[u8]) -> Result<Oid> {
        let id = Oid::hash_object(kind, data)?;
        // No refresh: a pack another process added meanwhile only costs a duplicate.
        if self.added.contains(&id) || self.odb.exists_ext(id, OdbLookupFlags::NO_REFRESH) {
            return Ok(id);
        }
        self.added.insert(id);
        self.written += 1;
        if self.packing {
            self.pack.push(kind, data)?;
            if self.pack.len() >= PACK_FLUSH_BYTES {
                self.pack.write_to(self.odb)?;
            }
        } else {
            self.loose.push((kind, data.to_vec()));
            if self.loose.len() > LOOSE_MAX {
                self.packing = true;
                for (kind, data) in std::mem::take(&mut self.loose) {
                    self.pack.push(kind, &data)?;
                }
            }
        }
        Ok(id)
    }

    /// Whether so many objects were added that they go into a pack.
    pub fn is_packing(&self) -> bool {
        self.packing
    }

    /// Makes everything added so far readable from the object store.
    pub fn flush(&mut self) -> Result<()> {
        for (kind, data) in self.loose.drain(..) {
            self.odb.write(kind, &data)?;
        }
        self.pack.write_to(self.odb)?;
        self.added.clear();
        Ok(())
    }
}

/// A pack being assembled in memory: version 2, whole objects (no deltas).
#[derive(Default)]
pub(crate) struct PackStream {
    bytes: Vec<u8>,
    count: u32,
}

impl PackStream {
    pub fn push(&mut self, kind: ObjectType, data: &[u8]) -> Result<()> {
        let code: u8 = match kind {
            ObjectType::Commit => 1,
            ObjectType::Tree => 2,
            ObjectType::Blob => 3,
            ObjectType::Tag => 4,
            other => {
                return Err(super::SnapshotError::Other(format!(
                    "cannot pack a {other} object"
                )));
            }
        };
        // Header: type and size, the size in little-endian groups of 4 then 7 bits.
        let mut size = data.len();
        let mut byte = (code << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size != 0 {
            self.bytes.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        self.bytes.push(byte);
        let mut z = flate2::write::ZlibEncoder::new(&mut self.bytes, flate2::Compression::fast());
        z.write_all(data)?;
        z.finish()?;
        self.count += 1;
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes waiting (compressed).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Hands the pack to libgit2's indexer (which writes the .pack and its .idx) and empties
    /// this stream.
    pub fn write_to(&mut self, odb: &Odb<'_>) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        let mut header = Vec::with_capacity(12);
        header.extend_from_slice(b"PACK");
        header.extend_from_slice(&2u32.to_be_bytes());
        header.extend_from_slice(&self.count.to_be_bytes());
        let mut hash = Sha1::new();
        hash.update(&header);
        hash.update(&self.bytes);
        let trailer = hash.finalize();
        let mut writer = odb.packwriter()?;
        writer.write_all(&header)?;
        writer.write_all(&self.bytes)?;
        writer.write_all(&trailer)?;
        writer.commit()?;
        self.bytes.clear();
        self.count = 0;
        Ok(())
    }
}

/// Writes the trees of `index` (every stage-0 entry) into `sink`; returns the root tree id.
/// The index is sorted by path bytes, which is also the order git wants inside a tree (a
/// folder sorts as `name/`, and all its paths share that prefix), so one pass with a stack
/// of open folders builds every tree.
pub(crate) fn write_index_trees(index: &git2::Index, sink: &mut ObjectSink<'_, '_>) -> Result<Oid> {
    // Each open folder: its path (with a trailing '/', empty for the root) and its entries.
    let mut open: Vec<(Vec<u8>, Vec<u8>)> = vec![(Vec::new(), Vec::new())];
    fn close(open: &mut Vec<(Vec<u8>, Vec<u8>)>, sink: &mut ObjectSink<'_, '_>) -> Result<()> {
        let (dir, body) = open.pop().expect("a folder to close");
        let id = sink.add(ObjectType::Tree, &body)?;
        let name = &dir[..dir.len() - 1];
        let name = &name[name.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)..];
        let parent = &mut open.last_mut().expect("the root stays open").1;
        tree_entry(parent, b"40000", name, id);
        Ok(())
    }
    for entry in index.iter() {
        let path = &entry.path;
        // Leave folders this path is not in.
        while !path.starts_with(&open.last().expect("root").0) {
            close(&mut open, sink)?;
        }
        // Enter the folders between the innermost open one and the file.
        let mut start = open.last().expect("root").0.len();
        while let Some(slash) = path[start..].iter().position(|&b| b == b'/') {
            let dir = path[..start + slash + 1].to_vec();
            start = dir.len();
            open.push((dir, Vec::new()));
        }
        let mode = match entry.mode {
            0o100755 => &b"100755"[..],
            0o120000 => b"120000",
            0o160000 => b"160000",
            _ => b"100644",
        };
        tree_entry(
            &mut open.last_mut().expect("root").1,
            mode,
            &path[start..],
            entry.id,
        );
    }
    while open.len() > 1 {
        close(&mut open, sink)?;
    }
    let (_, body) = open.pop().expect("root");
    sink.add(ObjectType::Tree, &body)
}

fn tree_entry(tree: &mut Vec<u8>, mode: &[u8], name: &[u8], id: Oid) {
    tree.extend_from_slice(mode);
    tree.push(b' ');
    tree.extend_from_slice(name);
    tree.push(0);
    tree.extend_from_slice(id.as_bytes());
}
