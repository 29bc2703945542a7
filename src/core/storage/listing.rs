//! Listing a folder tree of samples: files with chosen extensions, sorted, plus the modification
//! time of every folder visited (for cache validation). Class folders are walked in parallel;
//! a million-file ImageFolder is mostly `readdir` and string handling, both cheap here and slow
//! in Python.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

/// Files under one folder (relative to `base`, sorted), (folder, mtime in ns) of every folder,
/// and the entries skipped, with why: 0 for a folder already walked (a link cycle, or a second
/// link to it), else the OS error number that kept its kind or its entries from being read (a
/// loop of links, a dangling link, a sub-folder it may not read). Python words them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Listing {
    pub files: Vec<OsString>,
    pub folders: Vec<(OsString, i64)>,
    pub skipped: Vec<(OsString, i32)>,
}

/// `Listing::skipped`'s reason for a folder reached again.
pub const ALREADY_WALKED: i32 = 0;

fn mtime_ns(metadata: &fs::Metadata) -> i64 {
    metadata.mtime() * 1_000_000_000 + metadata.mtime_nsec()
}

fn has_extension(name: &OsString, extensions: &[String]) -> bool {
    let name = name.to_string_lossy().to_lowercase();
    extensions.iter().any(|extension| name.ends_with(extension.as_str()))
}

fn error_number(error: &io::Error) -> i32 {
    error.raw_os_error().unwrap_or(libc::EIO)
}

/// Walk `folder` recursively by the rules of stoker's dataset walks (`stoker._bounded._tree`):
/// symlinked folders are followed as Python's `os.walk(followlinks=True)` does, but each folder
/// once: a folder is known by its device and inode, and one reached again (a link to an
/// ancestor, a second link to the same folder) is skipped and reported. Without this a link
/// `up -> ..` made the walk endless, and one file became a sample per path through the loop
/// (`up/cat/up/cat/.../x.jpg`). An entry whose kind cannot be read through its links (a loop of
/// links, a dangling link) and a sub-folder that cannot be read are skipped and reported too;
/// only `folder` itself failing is an error.
pub fn walk(folder: &Path, base: &Path, extensions: &[String]) -> io::Result<Listing> {
    let named = |error: io::Error, path: &Path| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
    let mut listing = Listing::default();
    let mut visited: HashSet<(u64, u64)> = HashSet::new();
    // The folders above this one, down to the root: a link to one of them leads out of this
    // class folder and back into it.
    for ancestor in fs::canonicalize(folder).map_err(|error| named(error, folder))?.ancestors().skip(1) {
        if let Ok(metadata) = fs::metadata(ancestor) {
            visited.insert((metadata.dev(), metadata.ino()));
        }
    }
    let mut pending: Vec<PathBuf> = vec![folder.to_path_buf()];
    while let Some(current) = pending.pop() {
        let top = current.as_path() == folder;
        let metadata = match fs::metadata(&current) {
            Ok(metadata) => metadata,
            Err(error) if top => return Err(named(error, &current)),
            Err(error) => {
                listing.skipped.push((current.into_os_string(), error_number(&error)));
                continue;
            }
        };
        if !visited.insert((metadata.dev(), metadata.ino())) {
            listing.skipped.push((current.into_os_string(), ALREADY_WALKED));
            continue;
        }
        let entries = match fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(error) if top => return Err(named(error, &current)),
            Err(error) => {
                listing.skipped.push((current.into_os_string(), error_number(&error)));
                continue;
            }
        };
        listing.folders.push((current.clone().into_os_string(), mtime_ns(&metadata)));
        for entry in entries {
            let entry = match entry.and_then(|entry| Ok((entry.file_type()?, entry))) {
                Ok(found) => found,
                Err(error) => {
                    listing.skipped.push((current.clone().into_os_string(), error_number(&error)));
                    break; // the folder's listing broke off: what was read of it stays
                }
            };
            let (kind, entry) = entry;
            let target = if kind.is_symlink() {
                match fs::metadata(entry.path()) {
                    Ok(metadata) => Some(metadata),
                    Err(error) => {
                        listing.skipped.push((entry.path().into_os_string(), error_number(&error)));
                        continue;
                    }
                }
            } else {
                None
            };
            let is_folder = kind.is_dir() || target.as_ref().is_some_and(|metadata| metadata.is_dir());
            let is_file = kind.is_file() || target.as_ref().is_some_and(|metadata| metadata.is_file());
            if is_folder {
                pending.push(entry.path());
            } else if is_file && has_extension(&entry.file_name(), extensions) {
                // (A FIFO, socket or device, in the tree or behind a link, is not a sample:
                // reading one blocks or never ends.)
                let path = entry.path();
                let relative = path.strip_prefix(base).unwrap_or(&path);
                listing.files.push(relative.as_os_str().to_os_string());
            }
        }
    }
    listing.files.sort();
    Ok(listing)
}

/// `walk` every folder of `folders`, in parallel on `threads` threads; results in input order.
pub fn walk_all(folders: &[PathBuf], base: &Path, extensions: &[String], threads: usize) -> io::Result<Vec<Listing>> {
    let extensions: Vec<String> = extensions.iter().map(|extension| extension.to_lowercase()).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|index| format!("stoker-list-{index}"))
        .build()
        .map_err(io::Error::other)?;
    pool.install(|| folders.par_iter().map(|folder| walk(folder, base, &extensions)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_matching_files_sorted_with_folder_times() {
        let base = std::env::temp_dir().join(format!("stoker-listing-{}", std::process::id()));
        let class = base.join("cats");
        fs::create_dir_all(class.join("deep")).unwrap();
        for name in ["b.JPG", "a.jpg", "deep/c.png", "notes.txt"] {
            fs::write(class.join(name), b"x").unwrap();
        }
        let listings = walk_all(std::slice::from_ref(&class), &base, &[".jpg".into(), ".png".into()], 2).unwrap();
        let files: Vec<String> = listings[0].files.iter().map(|file| file.to_string_lossy().into_owned()).collect();
        assert_eq!(files, vec!["cats/a.jpg", "cats/b.JPG", "cats/deep/c.png"]);
        assert_eq!(listings[0].folders.len(), 2);
        let error = walk_all(&[base.join("missing")], &base, &[], 1).unwrap_err();
        assert!(error.to_string().contains("missing"));
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn symlink_loops_are_walked_once() {
        let base = std::env::temp_dir().join(format!("stoker-listing-loops-{}", std::process::id()));
        let class = base.join("cat");
        fs::create_dir_all(&class).unwrap();
        fs::write(class.join("x.jpg"), b"x").unwrap();
        for name in ["up0", "up1", "up2"] {
            std::os::unix::fs::symlink("..", class.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(".", class.join("here")).unwrap();
        std::os::unix::fs::symlink("nothing.jpg", class.join("dangling.jpg")).unwrap();
        std::os::unix::fs::symlink("self.jpg", class.join("self.jpg")).unwrap();
        let listings = walk_all(std::slice::from_ref(&class), &base, &[".jpg".into()], 1).unwrap();
        let files: Vec<String> = listings[0].files.iter().map(|file| file.to_string_lossy().into_owned()).collect();
        assert_eq!(files, vec!["cat/x.jpg"]);
        let mut skipped: Vec<(String, i32)> = listings[0]
            .skipped
            .iter()
            .map(|(path, why)| (Path::new(path).file_name().unwrap().to_string_lossy().into_owned(), *why))
            .collect();
        skipped.sort();
        let expected = [
            ("dangling.jpg", libc::ENOENT),
            ("here", ALREADY_WALKED),
            ("self.jpg", libc::ELOOP),
            ("up0", ALREADY_WALKED),
            ("up1", ALREADY_WALKED),
            ("up2", ALREADY_WALKED),
        ];
        assert_eq!(skipped, expected.map(|(name, why)| (name.to_string(), why)));
        fs::remove_dir_all(&base).unwrap();
    }
}
