//! An 8-bit planar YUV picture.

/// Chroma subsampling of a planar picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Chroma {
    /// 4:2:0: chroma planes half as wide and half as high (rounded up).
    C420,
    /// 4:2:2: chroma planes half as wide.
    C422,
    /// 4:4:4: all planes full size.
    C444,
    /// Luma only.
    Mono,
}

impl Chroma {
    /// The size of plane `p` (0: Y, 1: U, 2: V) of a `width`×`height` picture.
    pub fn plane_size(self, p: usize, width: usize, height: usize) -> (usize, usize) {
        let half = |n: usize| n.div_ceil(2);
        match (self, p) {
            (_, 0) => (width, height),
            (Chroma::Mono, _) => (0, 0),
            (Chroma::C420, _) => (half(width), half(height)),
            (Chroma::C422, _) => (half(width), height),
            (Chroma::C444, _) => (width, height),
        }
    }

    /// Planes it has.
    pub fn planes(self) -> usize {
        if self == Chroma::Mono {
            1
        } else {
            3
        }
    }

    /// Bytes of one `width`×`height` frame.
    pub fn frame_bytes(self, width: usize, height: usize) -> usize {
        (0..self.planes())
            .map(|p| {
                let (w, h) = self.plane_size(p, width, height);
                w * h
            })
            .sum()
    }

    /// The name Y4M's `C` parameter uses.
    pub fn y4m_name(self) -> &'static str {
        match self {
            Chroma::C420 => "420jpeg",
            Chroma::C422 => "422",
            Chroma::C444 => "444",
            Chroma::Mono => "mono",
        }
    }
}

/// A picture: its planes packed (no padding), Y then U then V.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// Width of the luma plane, pixels.
    pub width: usize,
    /// Height of the luma plane, pixels.
    pub height: usize,
    /// How the chroma planes are subsampled; sets their sizes (see [`Chroma::plane_size`]).
    pub chroma: Chroma,
    /// The samples, one byte each, planes packed row by row without padding: Y, then U, then
    /// V; [`Chroma::frame_bytes`] long.
    pub data: Vec<u8>,
}

impl Picture {
    /// A black picture (Y 16, U and V 128: limited range).
    pub fn black(width: usize, height: usize, chroma: Chroma) -> Picture {
        let mut data = vec![128u8; chroma.frame_bytes(width, height)];
        data[..width * height].fill(16);
        Picture {
            width,
            height,
            chroma,
            data,
        }
    }

    /// Plane `p`: its samples, its width and height.
    pub fn plane(&self, p: usize) -> (&[u8], usize, usize) {
        let mut off = 0;
        for q in 0..p {
            let (w, h) = self.chroma.plane_size(q, self.width, self.height);
            off += w * h;
        }
        let (w, h) = self.chroma.plane_size(p, self.width, self.height);
        (&self.data[off..off + w * h], w, h)
    }

    /// Whether `other` has the same size and sampling.
    pub fn same_format(&self, other: &Picture) -> bool {
        self.width == other.width && self.height == other.height && self.chroma == other.chroma
    }
}
