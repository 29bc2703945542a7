//! A container opened over a sample's bytes, and the decoder of its best stream of one kind.

use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::Once;

use ffmpeg_next::codec;
use ffmpeg_next::ffi;
use ffmpeg_next::format::context::Input;
use ffmpeg_next::media::Type;
use ffmpeg_next::{Packet, Rational};

use super::error::{MediaError, MediaResult};

/// FFmpeg's one-time set-up. Its own log stays quiet: every failure reaches the caller as a
/// per-sample error naming the sample, so FFmpeg's lines on stderr would only say it twice,
/// without the name.
fn initialize() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let _ = ffmpeg_next::init();
        ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Quiet);
    });
}

/// FFmpeg's read buffer for a sample (it reads through this in chunks).
const READ_BUFFER: usize = 32 << 10;

/// The largest video frame decoded, in pixels: 8K UHD (7680 x 4320) with room to spare. A
/// header that declares more (16000 x 16000 would take 1.6 GB a clip) is refused before a frame
/// is allocated, and FFmpeg's decoders enforce it on every frame (`max_pixels`), whatever later
/// headers in the stream say.
pub const MAX_FRAME_PIXELS: i64 = 36_000_000;

/// A container opened over a sample's bytes where they are: FFmpeg reads them through callbacks,
/// so nothing is copied but what the demuxer asks for. Derefs to the `Input`.
pub struct MemoryInput<'a> {
    input: ManuallyDrop<Input>,
    io: *mut ffi::AVIOContext,
    reader: *mut Reader<'a>,
    _bytes: PhantomData<&'a [u8]>,
}

/// Where FFmpeg is in the bytes.
struct Reader<'a> {
    data: &'a [u8],
    position: usize,
}

/// FFmpeg's read callback: copy up to `size` bytes from the current position.
///
/// # Safety
/// `opaque` is the `Reader` that `open` made and `MemoryInput` keeps alive for as long as the
/// AVIOContext exists; FFmpeg calls back from the thread driving the input, one call at a time,
/// with `buffer` valid for `size` bytes.
unsafe extern "C" fn read_packet(opaque: *mut c_void, buffer: *mut u8, size: c_int) -> c_int {
    // SAFETY: as the function's contract says.
    let reader = unsafe { &mut *(opaque as *mut Reader) };
    let remaining = &reader.data[reader.position..];
    if remaining.is_empty() {
        return ffi::AVERROR_EOF;
    }
    let count = remaining.len().min(size.max(0) as usize);
    // SAFETY: `count` is within both `remaining` and `buffer`'s `size` bytes; they cannot
    // overlap (FFmpeg's buffer is its own allocation).
    unsafe { ptr::copy_nonoverlapping(remaining.as_ptr(), buffer, count) };
    reader.position += count;
    count as c_int
}

/// FFmpeg's seek callback: SEEK_SET, SEEK_CUR, SEEK_END, or AVSEEK_SIZE for the length.
///
/// # Safety
/// As `read_packet`.
unsafe extern "C" fn seek(opaque: *mut c_void, offset: i64, whence: c_int) -> i64 {
    // SAFETY: as the function's contract says.
    let reader = unsafe { &mut *(opaque as *mut Reader) };
    let length = reader.data.len() as i64;
    if whence & ffi::AVSEEK_SIZE != 0 {
        return length;
    }
    let base = match whence & !ffi::AVSEEK_FORCE {
        ffi::SEEK_SET => 0,
        ffi::SEEK_CUR => reader.position as i64,
        ffi::SEEK_END => length,
        _ => return i64::from(ffi::AVERROR(ffi::EINVAL)),
    };
    let target = base.saturating_add(offset);
    if !(0..=length).contains(&target) {
        return i64::from(ffi::AVERROR(ffi::EINVAL));
    }
    reader.position = target as usize;
    target
}

/// Open a container over `bytes`.
pub fn open(bytes: &[u8]) -> MediaResult<MemoryInput<'_>> {
    if bytes.is_empty() {
        return Err(MediaError::Empty);
    }
    initialize();
    let reader = Box::into_raw(Box::new(Reader { data: bytes, position: 0 }));
    // SAFETY: every pointer is checked before use; on each failure path what was made is freed
    // once (avformat_open_input frees the format context it fails on, and leaves our custom
    // AVIOContext to us). On success `MemoryInput` owns the format context (through `Input`),
    // the AVIOContext with its buffer, and the reader, and frees them in that order.
    unsafe {
        let buffer = ffi::av_malloc(READ_BUFFER) as *mut u8;
        let mut io = if buffer.is_null() {
            ptr::null_mut()
        } else {
            ffi::avio_alloc_context(buffer, READ_BUFFER as c_int, 0, reader as *mut c_void, Some(read_packet), None, Some(seek))
        };
        let mut format = if io.is_null() { ptr::null_mut() } else { ffi::avformat_alloc_context() };
        let free_io = |io: &mut *mut ffi::AVIOContext, buffer: *mut u8| {
            if io.is_null() {
                ffi::av_free(buffer as *mut c_void);
            } else {
                ffi::av_freep(&mut (**io).buffer as *mut *mut u8 as *mut c_void);
                ffi::avio_context_free(io);
            }
        };
        if format.is_null() {
            free_io(&mut io, buffer);
            drop(Box::from_raw(reader));
            return Err(MediaError::Open("out of memory".into()));
        }
        (*format).pb = io;
        (*format).flags |= ffi::AVFMT_FLAG_CUSTOM_IO;
        let mut status = ffi::avformat_open_input(&mut format, ptr::null(), ptr::null(), ptr::null_mut());
        if status >= 0 {
            // Probing decodes a few frames: the decoders it opens get the frame limit too.
            let streams = (*format).nb_streams as usize;
            let mut options: Vec<*mut ffi::AVDictionary> = vec![ptr::null_mut(); streams];
            for entry in options.iter_mut() {
                ffi::av_dict_set_int(entry, c"max_pixels".as_ptr(), MAX_FRAME_PIXELS, 0);
            }
            status = ffi::avformat_find_stream_info(format, if streams == 0 { ptr::null_mut() } else { options.as_mut_ptr() });
            options.iter_mut().for_each(|entry| ffi::av_dict_free(entry));
            if status < 0 {
                ffi::avformat_close_input(&mut format);
            }
        }
        if status < 0 {
            free_io(&mut io, buffer);
            drop(Box::from_raw(reader));
            return Err(MediaError::Open(ffmpeg_next::Error::from(status).to_string()));
        }
        Ok(MemoryInput { input: ManuallyDrop::new(Input::wrap(format)), io, reader, _bytes: PhantomData })
    }
}

impl Deref for MemoryInput<'_> {
    type Target = Input;

    fn deref(&self) -> &Input {
        &self.input
    }
}

impl DerefMut for MemoryInput<'_> {
    fn deref_mut(&mut self) -> &mut Input {
        &mut self.input
    }
}

impl Drop for MemoryInput<'_> {
    fn drop(&mut self) {
        // SAFETY: the format context closes first (AVFMT_FLAG_CUSTOM_IO: it leaves `pb` alone;
        // decoders made from its streams hold no reference to it), then the AVIOContext and its
        // current buffer (FFmpeg may have replaced the one we gave it), then the reader it
        // called back into. Each is freed once, here.
        unsafe {
            ManuallyDrop::drop(&mut self.input);
            ffi::av_freep(&mut (*self.io).buffer as *mut *mut u8 as *mut c_void);
            ffi::avio_context_free(&mut self.io);
            drop(Box::from_raw(self.reader));
        }
    }
}

/// The best stream of `kind` in `input`: its index, time base, and an opened decoder context.
pub struct StreamDecoder {
    pub index: usize,
    pub codec: codec::Id,
    pub time_base: Rational,
    pub context: codec::context::Context,
}

/// Find the best stream of `kind` ("audio" or "video" in errors) and make its decoder context.
pub fn best_stream(input: &Input, kind: Type) -> MediaResult<StreamDecoder> {
    let name = if kind == Type::Audio { "audio" } else { "video" };
    let stream = input.streams().best(kind).ok_or(MediaError::NoStream(name))?;
    let parameters = stream.parameters();
    let codec_id = parameters.id();
    if ffmpeg_next::decoder::find(codec_id).is_none() {
        return Err(MediaError::UnsupportedCodec(format!("no {name} decoder for {codec_id:?} in this FFmpeg build")));
    }
    if kind == Type::Video {
        // SAFETY: `parameters` wraps the stream's valid AVCodecParameters; plain fields are read.
        let (width, height) = unsafe { ((*parameters.as_ptr()).width, (*parameters.as_ptr()).height) };
        if i64::from(width.max(0)) * i64::from(height.max(0)) > MAX_FRAME_PIXELS {
            return Err(MediaError::Corrupt(format!(
                "the video declares {width}x{height} frames, past the {MAX_FRAME_PIXELS}-pixel limit (8K UHD is 33,177,600)"
            )));
        }
    }
    let mut context = codec::context::Context::from_parameters(parameters)
        .map_err(|error| MediaError::UnsupportedCodec(format!("{codec_id:?}: {error}")))?;
    // SAFETY: the context was just made and is not open yet; max_pixels is a plain field that
    // avcodec_open2 and every frame allocation read.
    unsafe { (*context.as_mut_ptr()).max_pixels = MAX_FRAME_PIXELS };
    Ok(StreamDecoder { index: stream.index(), codec: codec_id, time_base: stream.time_base(), context })
}

impl StreamDecoder {
    /// The decoder, told the stream's time base: decoders that trim encoder delay (MP3's LAME
    /// header, Opus pre-skip, AAC priming) move the first frame's timestamp by what they trimmed
    /// only when they know it, and would otherwise shift the whole file by that much.
    pub fn decoder(self) -> ffmpeg_next::decoder::Decoder {
        let mut decoder = self.context.decoder();
        decoder.set_packet_time_base(self.time_base);
        decoder
    }
}

/// A time in a stream's time base, in seconds.
pub fn seconds(timestamp: i64, time_base: Rational) -> f64 {
    timestamp as f64 * f64::from(time_base.numerator()) / f64::from(time_base.denominator().max(1))
}

/// Read the container's next packet into `packet`, releasing what it held first.
///
/// `Packet::read` hands av_read_frame the packet as it is, and av_read_frame overwrites it
/// without releasing its buffer: a packet reused that way leaks every buffer but the last (a
/// few hundred kilobytes a sample).
pub fn next_packet(input: &mut Input, packet: &mut Packet) -> Result<(), ffmpeg_next::Error> {
    *packet = Packet::empty();
    packet.read(input)
}

/// Seek the container back to its start (after a seek that went too far).
pub fn seek_to_start(input: &mut Input) {
    let _ = input.seek(i64::MIN + 1, ..0);
}

/// Seek the container to the last keyframe at or before `seconds` (no-op at the start). A failed
/// seek leaves the reader where it was, at the start: slower, never wrong.
pub fn seek_before(input: &mut Input, seconds: f64) {
    if seconds <= 0.0 {
        return;
    }
    let timestamp = (seconds * f64::from(ffmpeg_next::ffi::AV_TIME_BASE)) as i64;
    let _ = input.seek(timestamp, ..timestamp);
}
