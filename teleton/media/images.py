"""Turn the bytes of a photo, an image document or a sticker into an image the model can take.

``prepare_image`` decodes with Pillow, turns the picture upright (EXIF orientation), takes the first frame of
an animation, drops every piece of metadata (EXIF carries GPS coordinates and the camera's serial number:
none of it may reach a provider or a log), downscales to ``max_side`` and re-encodes until the result fits
``max_bytes``. Anything that cannot be used raises ``MediaError`` with a one-line reason starting "image:".

The functions are plain and synchronous and decoding is CPU-bound: the caller runs them in a thread
(``asyncio.to_thread``). They share no state, so several may run at once.
"""

from __future__ import annotations

import base64
import io
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from teleton.media.errors import MediaError
from teleton.text.lines import reason

REASON_CAP = 120  # characters of a library's error message in ours

MAX_SIDE = 1568  # Anthropic's recommended long edge; larger images are resized by the API anyway
MAX_BYTES = 3_750_000  # base64 of this stays under the 5 MB per-image limit of the Messages API
# 50 MP admits a 48 MP phone sensor (8064x6048) and refuses what would need gigabytes to decode.
MAX_PIXELS = 50_000_000

# Formats Pillow may parse here. Pillow knows many more (EPS runs Ghostscript, PSD, ICNS, …): an untrusted
# file is never handed to a decoder we have no reason to run. (Camera MPO files open through JPEG.)
_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF", "AVIF")
# Formats whose pixels are exact: screenshots and drawings keep sharp text as PNG when that fits.
_LOSSLESS = {"PNG", "GIF", "BMP", "TIFF"}
_JPEG_QUALITIES = (85, 75, 65, 55, 45)
_MIN_SIDE = 64  # below this an image is useless to a model: give up instead of shrinking further


@dataclass(frozen=True)
class PreparedImage:
    media_type: str  # "image/jpeg" or "image/png"
    data: bytes
    width: int
    height: int

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


def image_block(prepared: PreparedImage) -> dict[str, Any]:
    """An Anthropic-style image content block (the OpenAI provider translates it at the edge)."""
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": prepared.media_type, "data": prepared.base64()},
    }


def prepare_image(
    data: bytes, *, max_side: int = MAX_SIDE, max_bytes: int = MAX_BYTES, max_pixels: int = MAX_PIXELS
) -> PreparedImage:
    if max_side < 1 or max_bytes < 1:
        raise ValueError("max_side and max_bytes must be positive")
    if not data:
        raise MediaError("image: the file is empty")
    not_image = _not_an_image(data)
    if not_image:
        raise MediaError(f"image: {not_image}")
    image = _decode(data, max_side, max_pixels)
    lossless = image.format in _LOSSLESS or _is_lossless_webp(image)
    image = _upright(image)
    image = _to_srgb(image)
    image = _normalise_mode(image)
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    return _encode(image, max_bytes, prefer_png=lossless or image.mode == "RGBA")


# -- decoding --------------------------------------------------------------------------------------------


def _not_an_image(data: bytes) -> str | None:
    """Name the things Telegram sends where an image is expected but that are not one."""
    head = data[:32]
    if head.startswith(b"\x1f\x8b"):
        # A .tgs sticker is gzip-compressed Lottie JSON: vector animation, nothing Pillow can draw.
        return "an animated sticker (TGS, Lottie animation) is not an image; use its thumbnail"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "a video sticker or video (WebM/Matroska) is not an image; use its thumbnail"
    if head[4:8] == b"ftyp" and b"avif" not in data[8:64]:
        brand = head[8:12]
        if brand in (b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"):
            return "HEIC/HEIF images are not supported; send it as JPEG or as a photo"
        return "a video (MP4/QuickTime) is not an image"
    if head.startswith(b"%PDF"):
        return "a PDF is a document, not an image"
    return None


def _decode(data: bytes, max_side: int, max_pixels: int) -> Image.Image:
    Image.init()  # registers the plugins once; AVIF is missing from some Pillow builds
    formats = [name for name in _FORMATS if name in Image.OPEN]
    try:
        image = Image.open(io.BytesIO(data), formats=formats)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        # Pillow refuses above twice its own limit before we see the size (and warns above it, which a
        # process running with warnings as errors raises).
        raise _too_many_pixels("", max_pixels) from None
    except UnidentifiedImageError:
        raise MediaError("image: not a supported image format (JPEG, PNG, WebP, GIF, BMP, TIFF, AVIF)") from None
    except (OSError, SyntaxError, ValueError, struct.error, EOFError, zlib.error) as exc:
        raise MediaError(f"image: unreadable header ({reason(exc, REASON_CAP)})") from None
    width, height = image.size
    if width < 1 or height < 1:
        raise MediaError("image: declares an empty size")
    if width * height > max_pixels:
        raise _too_many_pixels(f"{width}x{height}", max_pixels)
    if image.format in ("JPEG", "MPO"):
        # libjpeg decodes at 1/2, 1/4 or 1/8 scale for free: a 48 MP photo never occupies 150 MB.
        image.draft("RGB", (max_side, max_side))
    try:
        image.load()  # the first frame only: animations are seen as their opening picture
    except Image.DecompressionBombError:
        raise _too_many_pixels("", max_pixels) from None
    except (OSError, SyntaxError, ValueError, struct.error, EOFError, zlib.error, IndexError) as exc:
        raise MediaError(
            f"image: corrupt or truncated {image.format or 'image'} data ({reason(exc, REASON_CAP)})"
        ) from None
    return image


def _too_many_pixels(size: str, max_pixels: int) -> MediaError:
    what = f"{size} is too many pixels" if size else "too many pixels"
    return MediaError(f"image: {what} to decode safely (limit {max_pixels / 1_000_000:g} megapixels)")


def _is_lossless_webp(image: Image.Image) -> bool:
    # Static stickers are WebP; a lossless one is a drawing and stays sharp as PNG.
    return image.format == "WEBP" and bool(image.info.get("lossless"))


def _upright(image: Image.Image) -> Image.Image:
    try:
        return ImageOps.exif_transpose(image) or image
    except (OSError, ValueError, SyntaxError, struct.error, KeyError, TypeError):
        return image  # a broken EXIF block must not cost us the picture: keep it as stored


def _to_srgb(image: Image.Image) -> Image.Image:
    """Convert from an embedded colour profile (Display P3 on iPhones, CMYK press profiles) to sRGB.

    The profile itself is dropped with the rest of the metadata, so without this the colours would shift.
    """
    icc = image.info.get("icc_profile")
    if not icc or image.mode not in ("RGB", "RGBA", "CMYK", "L"):
        return image
    out_mode = "RGBA" if image.mode == "RGBA" else "RGB"
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        converted = ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"), outputMode=out_mode)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return image  # a malformed profile: plain conversion below is good enough for a model
    return converted or image


def _normalise_mode(image: Image.Image) -> Image.Image:
    """Reduce every Pillow mode to L, RGB or RGBA (alpha kept only where some pixel is see-through)."""
    mode = image.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):
        # 16-bit scans and PNGs: convert("L") would clip everything above 255 to white.
        wide = image.convert("I") if mode != "I" else image
        high = wide.getextrema()[1]
        scale = 255 / high if isinstance(high, int | float) and high > 255 else 1
        image = wide.point(lambda v: v * scale).convert("L")
    elif mode == "F":
        image = image.convert("L")
    elif "transparency" in image.info or mode in ("LA", "La", "PA", "RGBa", "RGBA"):
        image = image.convert("RGBA")
    elif mode == "1":
        image = image.convert("L")
    elif mode not in ("L", "RGB"):  # P without transparency, CMYK without a profile, YCbCr, LAB, HSV
        image = image.convert("RGB")
    if image.mode == "RGBA" and image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB")
    # A fresh info dict: EXIF, XMP, ICC, comments and PNG text chunks must not be written back out.
    image.info = {}
    return image


# -- encoding --------------------------------------------------------------------------------------------


def _encode(image: Image.Image, max_bytes: int, *, prefer_png: bool) -> PreparedImage:
    # Output is JPEG or PNG only: every provider takes both, while local servers (llama.cpp's stb_image)
    # cannot read WebP.
    if prefer_png:
        png = _save(image, "PNG")
        if len(png) <= max_bytes:
            return PreparedImage("image/png", png, image.width, image.height)
    if image.mode == "RGBA":
        image = _flatten(image)
    while True:
        for quality in _JPEG_QUALITIES:
            jpeg = _save(image, "JPEG", quality=quality)
            if len(jpeg) <= max_bytes:
                return PreparedImage("image/jpeg", jpeg, image.width, image.height)
        if max(image.size) * 3 // 4 < _MIN_SIDE:
            raise MediaError(f"image: cannot be made to fit in {max_bytes} bytes")
        # Quality alone did not fit (noise-like content): fewer pixels, then the quality ladder again.
        image = image.resize((max(1, image.width * 3 // 4), max(1, image.height * 3 // 4)), Image.Resampling.LANCZOS)


def _flatten(image: Image.Image) -> Image.Image:
    # JPEG has no alpha; white is what Telegram shows behind a transparent sticker in a light theme.
    background = Image.new("RGB", image.size, (255, 255, 255))
    background.paste(image, mask=image.getchannel("A"))
    return background


def _save(image: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    # Explicitly empty metadata: Pillow would otherwise copy some of it from image.info on save.
    image.save(out, fmt, exif=b"", **options)
    return out.getvalue()
