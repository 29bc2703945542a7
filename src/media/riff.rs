//! A check of RIFF files (WAV, AVI) before FFmpeg reads them: every chunk's declared size must fit
//! in the bytes there are. FFmpeg's WAV demuxer trusts a LIST/INFO entry's size and allocates it
//! before reading (a 2 GB allocation for a 100-byte file); the sample's bytes are all in memory
//! here, so the sizes can be checked against them first. And a WAV cut short, which FFmpeg would
//! read as a shorter, valid file (`check_wav_length`), for the decoder and the probe alike.

use super::error::{MediaError, MediaResult};

/// How deep LIST chunks are followed (INFO lists sit one level down; AVI's a few).
const MAX_DEPTH: usize = 4;

/// `Ok` unless `bytes` is a RIFF file with a chunk that declares more bytes than follow it. The
/// `data` (and AVI's `movi`) chunk may run past the end: a stream cut short, or written with an
/// open-ended size, which FFmpeg reads as far as it goes (and the decoders report as truncated).
pub fn check(bytes: &[u8]) -> MediaResult<()> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" {
        return Ok(());
    }
    walk(bytes, 12, bytes.len(), 0)
}

/// A WAV file cut short: FFmpeg takes a WAV's duration from the file's size, so a truncated one
/// would read as a shorter, valid file. Its `data` chunk's declared size says otherwise.
pub fn check_wav_length(bytes: &[u8]) -> MediaResult<()> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Ok(());
    }
    let mut position = 12;
    while position + 8 <= bytes.len() {
        let size = u32::from_le_bytes(bytes[position + 4..position + 8].try_into().expect("4 bytes")) as usize;
        if &bytes[position..position + 4] == b"data" {
            // 0 and 0xFFFFFFFF mean "unknown" (a stream written without seeking back).
            let available = bytes.len() - position - 8;
            if size != 0 && size != u32::MAX as usize && size > available {
                return Err(MediaError::Corrupt(format!("the WAV header declares {size} bytes of audio; the file holds {available}")));
            }
            return Ok(());
        }
        position += 8 + size + (size & 1);
    }
    Ok(())
}

fn walk(bytes: &[u8], start: usize, end: usize, depth: usize) -> MediaResult<()> {
    let mut at = start;
    while at + 8 <= end {
        let id = &bytes[at..at + 4];
        let size = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]) as usize;
        let body = at + 8;
        let remaining = end - body;
        let is_stream = id == b"data" || (id == b"LIST" && bytes.get(body..body + 4) == Some(b"movi"));
        if size > remaining {
            if is_stream {
                return Ok(());
            }
            return Err(MediaError::Corrupt(format!(
                "RIFF chunk '{}' at byte {at} declares {size} bytes, and {remaining} follow it",
                String::from_utf8_lossy(id)
            )));
        }
        if id == b"LIST" && size >= 4 && depth < MAX_DEPTH && !is_stream {
            walk(bytes, body + 4, body + size, depth + 1)?;
        }
        at = body + size + (size & 1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: &[u8; 4], declared: u32, body: &[u8]) -> Vec<u8> {
        let mut out = id.to_vec();
        out.extend_from_slice(&declared.to_le_bytes());
        out.extend_from_slice(body);
        if body.len() % 2 == 1 {
            out.push(0);
        }
        out
    }

    fn wav(chunks: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = chunks.concat();
        let mut out = b"RIFF".to_vec();
        out.extend_from_slice(&((body.len() + 4) as u32).to_le_bytes());
        out.extend_from_slice(b"WAVE");
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn a_well_formed_file_and_an_open_ended_data_chunk_pass() {
        let info = [b"INFO".to_vec(), chunk(b"INAM", 5, b"tone\0")].concat();
        let file = wav(&[chunk(b"fmt ", 16, &[0; 16]), chunk(b"LIST", info.len() as u32, &info), chunk(b"data", 4, &[0; 4])]);
        assert!(check(&file).is_ok());
        let open_ended = wav(&[chunk(b"fmt ", 16, &[0; 16]), chunk(b"data", u32::MAX, &[0; 64])]);
        assert!(check(&open_ended).is_ok());
        assert!(check(b"not riff at all").is_ok());
    }

    #[test]
    fn a_chunk_larger_than_the_file_is_named() {
        let huge_list = wav(&[chunk(b"fmt ", 16, &[0; 16]), chunk(b"LIST", 0x7FFF_FFFF, b"INFO")]);
        let error = check(&huge_list).unwrap_err().to_string();
        assert!(error.contains("'LIST'") && error.contains("2147483647"), "{error}");
        let info = [b"INFO".to_vec(), chunk(b"INAM", 0x7FFF_FFF0, b"x")].concat();
        let huge_entry = wav(&[chunk(b"fmt ", 16, &[0; 16]), chunk(b"LIST", info.len() as u32, &info), chunk(b"data", 4, &[0; 4])]);
        assert!(check(&huge_entry).unwrap_err().to_string().contains("'INAM'"));
    }
}
