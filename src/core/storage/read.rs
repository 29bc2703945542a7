//! Positional reads of planned ranges from one file: no seek state, so any number of threads
//! may read one file at once (the LMDBIO paper's explicit `pread` instead of `mmap`).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::coalesce::{plan, Request};

/// Read every request from `path`, coalescing as `plan` does. Returns one buffer per request, in
/// request order. A request past the end of the file is an `UnexpectedEof` error that names the
/// file, the offset and the file's size.
pub fn read_ranges(path: &Path, requests: &[Request], max_gap: u64, max_read: u64) -> io::Result<Vec<Vec<u8>>> {
    let file = File::open(path).map_err(|error| io::Error::new(error.kind(), format!("{}: {error}", path.display())))?;
    let mut answers: Vec<Vec<u8>> = vec![Vec::new(); requests.len()];
    for read in plan(requests, max_gap, max_read) {
        let mut buffer = vec![0u8; read.length as usize];
        if let Err(error) = file.read_exact_at(&mut buffer, read.offset) {
            let size = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
            return Err(io::Error::new(
                error.kind(),
                format!("{}: cannot read {} bytes at offset {} (file has {size} bytes): {error}", path.display(), read.length, read.offset),
            ));
        }
        if let [(index, 0)] = read.serves[..] {
            // One request, read exactly: hand over the buffer itself.
            answers[index] = buffer;
            continue;
        }
        for (index, start) in read.serves {
            let length = requests[index].length as usize;
            answers[index] = buffer[start as usize..start as usize + length].to_vec();
        }
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_match_the_file_in_request_order() {
        let mut file = tempfile();
        let content: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        file.1.write_all(&content).unwrap();
        let requests = [
            Request { offset: 9000, length: 100 },
            Request { offset: 10, length: 20 },
            Request { offset: 25, length: 10 },
            Request { offset: 30, length: 0 },
        ];
        let answers = read_ranges(&file.0, &requests, 64, 1 << 20).unwrap();
        for (request, answer) in requests.iter().zip(&answers) {
            let start = request.offset as usize;
            assert_eq!(answer.as_slice(), &content[start..start + request.length as usize]);
        }
        let error = read_ranges(&file.0, &[Request { offset: 9990, length: 20 }], 0, 1 << 20).unwrap_err();
        assert!(error.to_string().contains("file has 10000 bytes"), "{error}");
        std::fs::remove_file(&file.0).unwrap();
    }

    fn tempfile() -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("stoker-read-test-{}", std::process::id()));
        let file = File::create(&path).unwrap();
        (path, file)
    }
}
