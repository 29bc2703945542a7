//! The audio and video transforms' options, checked once, as the specs the decoders read.
//!
//! `AudioTransform` and `VideoTransform` (the core's Python classes) are built from these, and the
//! media part rebuilds the same specs from the same keyword arguments: one place says what a valid
//! transform is, whichever side reads it.

use super::frame_geometry::{FrameGeometry, Resize};
use super::window::{ClipStep, Placement};

/// How the output's channels come from the input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channels {
    /// Mix to this many channels (1: mono down-mix, the mean of the input's).
    Mix(usize),
    /// Keep only this input channel (0-based).
    Select(usize),
}

/// What to make of every audio sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AudioSpec {
    /// Output rate in Hz.
    pub sample_rate: u32,
    /// Window length, in samples at `sample_rate`.
    pub length: usize,
    pub channels: Channels,
    pub placement: Placement,
}

impl AudioSpec {
    /// Channels in the output.
    pub fn output_channels(&self) -> usize {
        match self.channels {
            Channels::Mix(count) => count,
            Channels::Select(_) => 1,
        }
    }

    /// Values in one sample's slot.
    pub fn slot_len(&self) -> usize {
        self.output_channels() * self.length
    }
}

/// The audio transform's output rates, in Hz: the range users meet, from telephone 8 kHz down to
/// anything and up to studio 768 kHz.
pub const AUDIO_OUTPUT_RATES: std::ops::RangeInclusive<u32> = 1..=768_000;

/// How a clip's values are laid out in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoLayout {
    /// (frames, height, width, channels).
    Thwc,
    /// (frames, channels, height, width), as torchvision and torchcodec give frames.
    Tchw,
    /// (channels, frames, height, width), as 3D convolutions take clips.
    Cthw,
}

impl VideoLayout {
    /// The layout's name, as the Python API spells it.
    pub fn name(self) -> &'static str {
        match self {
            VideoLayout::Thwc => "THWC",
            VideoLayout::Tchw => "TCHW",
            VideoLayout::Cthw => "CTHW",
        }
    }
}

/// What to make of every video sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VideoSpec {
    /// Frames per clip.
    pub frames: usize,
    pub step: ClipStep,
    pub placement: Placement,
    pub geometry: FrameGeometry,
    pub layout: VideoLayout,
}

impl VideoSpec {
    /// Values in one clip's slot, or None when the frame size depends on the video.
    pub fn slot_len(&self) -> Option<usize> {
        self.geometry.output_size().map(|(width, height)| self.frames * 3 * width * height)
    }

    /// A clip's shape in its layout's order (`video_spec` makes sure the frame size is known).
    pub fn output_shape(&self) -> (usize, usize, usize, usize) {
        let (width, height) = self.geometry.output_size().expect("checked when built");
        let frames = self.frames;
        match self.layout {
            VideoLayout::Thwc => (frames, height, width, 3),
            VideoLayout::Tchw => (frames, 3, height, width),
            VideoLayout::Cthw => (3, frames, height, width),
        }
    }
}

/// A window's or clip's placement from its Python name.
pub fn placement(name: &str, what: &str) -> Result<Placement, String> {
    match name {
        "random" => Ok(Placement::Random),
        "center" => Ok(Placement::Center),
        "start" => Ok(Placement::Start),
        other => Err(format!("{what} must be \"random\", \"center\" or \"start\", got {other:?}")),
    }
}

/// A placement's Python name.
pub fn placement_name(placement: Placement) -> &'static str {
    match placement {
        Placement::Random => "random",
        Placement::Center => "center",
        Placement::Start => "start",
    }
}

/// The audio transform's keyword arguments, as Python passes them.
#[derive(Debug, Clone)]
pub struct AudioOptions<'a> {
    pub sample_rate: u32,
    pub samples: usize,
    pub channels: usize,
    pub select_channel: Option<usize>,
    pub window: &'a str,
    pub dtype: &'a str,
}

/// An audio spec and whether its samples are int16 (else float32).
pub fn audio_spec(options: &AudioOptions<'_>) -> Result<(AudioSpec, bool), String> {
    let AudioOptions { sample_rate, samples, channels, select_channel, window, dtype } = *options;
    if !AUDIO_OUTPUT_RATES.contains(&sample_rate) {
        return Err(format!("sample_rate must be 1..768000 Hz, got {sample_rate}"));
    }
    if samples == 0 {
        return Err("the window must hold at least one sample".into());
    }
    let channels = match select_channel {
        Some(channel) if channels == 1 => Channels::Select(channel),
        Some(_) => return Err("select_channel gives one channel: leave channels at 1".into()),
        None if (1..=8).contains(&channels) => Channels::Mix(channels),
        None => return Err(format!("channels must be 1..8, got {channels}")),
    };
    let int16 = match dtype {
        "float32" => false,
        "int16" => true,
        other => return Err(format!("dtype must be \"float32\" or \"int16\", got {other:?}")),
    };
    Ok((AudioSpec { sample_rate, length: samples, channels, placement: placement(window, "window")? }, int16))
}

/// The video transform's keyword arguments, as Python passes them.
#[derive(Debug, Clone)]
pub struct VideoOptions<'a> {
    pub frames: usize,
    pub stride: usize,
    pub fps: Option<f64>,
    pub clip: &'a str,
    pub resize_shorter: Option<usize>,
    /// (height, width).
    pub resize: Option<(usize, usize)>,
    /// (height, width).
    pub center_crop: Option<(usize, usize)>,
    /// (height, width).
    pub random_crop: Option<(usize, usize)>,
    /// (height, width): resize to cover it and crop the overhang, where ``cover_crop`` says.
    pub cover: Option<(usize, usize)>,
    pub cover_crop: &'a str,
    pub flip_probability: f64,
    pub layout: &'a str,
}

/// A video spec from its options; every clip has one frame size.
pub fn video_spec(options: &VideoOptions<'_>) -> Result<VideoSpec, String> {
    let VideoOptions {
        frames,
        stride,
        fps,
        clip,
        resize_shorter,
        resize,
        center_crop,
        random_crop,
        cover,
        cover_crop,
        flip_probability,
        layout,
    } = *options;
    if !(0.0..=1.0).contains(&flip_probability) {
        return Err(format!("flip_probability must be in [0, 1], got {flip_probability}"));
    }
    if center_crop.is_some() && random_crop.is_some() {
        return Err("center_crop and random_crop are exclusive".into());
    }
    if frames == 0 || stride == 0 {
        return Err("frames and stride must be at least 1".into());
    }
    let (step, placement) = match (clip, fps) {
        ("uniform", None) if stride == 1 => (ClipStep::Spread, Placement::Start),
        ("uniform", _) => return Err("clip=\"uniform\" spreads the frames over the whole video: give no stride or fps".into()),
        (_, Some(rate)) if !(rate.is_finite() && rate > 0.0) => return Err(format!("fps must be positive, got {rate}")),
        (_, Some(_)) if stride != 1 => return Err("give stride or fps, not both".into()),
        (name, Some(rate)) => (ClipStep::Rate(rate), placement(name, "clip")?),
        (name, None) => (ClipStep::Stride(stride), placement(name, "clip")?),
    };
    let resize = match (resize_shorter, resize) {
        (Some(_), Some(_)) => return Err("give resize_shorter or resize, not both".into()),
        (Some(side), None) => Resize::Shorter(side),
        (None, Some((height, width))) => Resize::Exact(width, height),
        (None, None) => Resize::None,
    };
    if !matches!(cover_crop, "center" | "random") {
        return Err(format!("cover_crop must be \"center\" or \"random\", got {cover_crop:?}"));
    }
    let geometry = match cover {
        Some(_) if resize != Resize::None || center_crop.is_some() || random_crop.is_some() => {
            return Err("cover=(height, width) resizes and crops by itself: give no resize or crop with it".into())
        }
        Some((height, width)) => FrameGeometry {
            resize: Resize::Cover(width, height),
            crop: Some((width, height)),
            random_crop: cover_crop == "random",
            flip_probability,
        },
        None => FrameGeometry {
            resize,
            crop: center_crop.or(random_crop).map(|(height, width)| (width, height)),
            random_crop: random_crop.is_some(),
            flip_probability,
        },
    };
    let zero = matches!(
        geometry.resize,
        Resize::Shorter(0) | Resize::Exact(0, _) | Resize::Exact(_, 0) | Resize::Cover(0, _) | Resize::Cover(_, 0)
    ) || geometry.crop.is_some_and(|(width, height)| width == 0 || height == 0);
    if zero {
        return Err("sizes must be positive".into());
    }
    if geometry.output_size().is_none() {
        return Err("a batch needs one frame size: give center_crop, random_crop or resize=(height, width)".into());
    }
    let layout = match layout {
        "THWC" => VideoLayout::Thwc,
        "TCHW" => VideoLayout::Tchw,
        "CTHW" => VideoLayout::Cthw,
        other => return Err(format!("layout must be \"TCHW\", \"THWC\" or \"CTHW\", got {other:?}")),
    };
    Ok(VideoSpec { frames, step, placement, geometry, layout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audio(sample_rate: u32, channels: usize, select_channel: Option<usize>) -> Result<(AudioSpec, bool), String> {
        audio_spec(&AudioOptions { sample_rate, samples: 16, channels, select_channel, window: "random", dtype: "float32" })
    }

    #[test]
    fn audio_options_are_checked() {
        assert!(audio(0, 1, None).unwrap_err().contains("sample_rate"));
        assert!(audio(768_001, 1, None).unwrap_err().contains("sample_rate"));
        assert!(audio(16_000, 9, None).unwrap_err().contains("channels"));
        assert!(audio(16_000, 2, Some(0)).unwrap_err().contains("select_channel"));
        assert_eq!(audio(16_000, 1, Some(1)).unwrap().0.channels, Channels::Select(1));
        assert_eq!(audio(16_000, 2, None).unwrap().0.slot_len(), 32);
    }

    #[test]
    fn video_options_need_one_frame_size() {
        let options = VideoOptions {
            frames: 4,
            stride: 1,
            fps: None,
            clip: "random",
            resize_shorter: Some(32),
            resize: None,
            center_crop: None,
            random_crop: None,
            cover: None,
            cover_crop: "center",
            flip_probability: 0.0,
            layout: "TCHW",
        };
        assert!(video_spec(&options).unwrap_err().contains("one frame size"));
        let cropped = video_spec(&VideoOptions { center_crop: Some((16, 24)), ..options.clone() }).unwrap();
        assert_eq!(cropped.slot_len(), Some(4 * 3 * 16 * 24));
        assert!(video_spec(&VideoOptions { fps: Some(f64::NAN), ..options.clone() }).unwrap_err().contains("fps"));
        let covered = video_spec(&VideoOptions { resize_shorter: None, cover: Some((16, 24)), ..options.clone() }).unwrap();
        assert_eq!(covered.output_shape(), (4, 3, 16, 24));
        assert!(video_spec(&VideoOptions { cover: Some((16, 24)), ..options.clone() }).unwrap_err().contains("no resize or crop"));
        assert!(video_spec(&VideoOptions { resize_shorter: None, cover: Some((16, 24)), cover_crop: "left", ..options })
            .unwrap_err()
            .contains("cover_crop"));
    }
}
