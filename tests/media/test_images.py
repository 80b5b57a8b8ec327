"""Images as the model receives them: upright, small enough, without metadata; bad files refused in one line.

Every picture is drawn here with Pillow; nothing is read from disk.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
import struct
import zlib

import pytest
from PIL import Image, ImageDraw, PngImagePlugin

from teleton.media.errors import MediaError
from teleton.media.images import PreparedImage, image_block, prepare_image

RED = (220, 20, 20)
BLUE = (20, 20, 220)


def _encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def _photo(width: int = 4000, height: int = 3000) -> Image.Image:
    """A busy picture with text: gradients, shapes and words, like a photo of a receipt."""
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for x in range(0, width, 8):
        draw.line([(x, 0), (x, height)], fill=(x * 255 // width, 120, 255 - x * 255 // width), width=8)
    rng = random.Random(7)
    for _ in range(300):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.ellipse([x, y, x + 90, y + 60], fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    for row in range(0, height, 120):
        draw.text((40, row), "TOTAL 42.00 EUR  receipt line", fill=(0, 0, 0), font_size=80)
    return image


def _gps_exif() -> Image.Exif:
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"  # Make
    exif[0x0110] = "Model X"  # Model
    gps = exif.get_ifd(0x8825)
    gps[1] = "N"
    gps[2] = (55.0, 45.0, 21.0)  # latitude: Moscow
    gps[3] = "E"
    gps[4] = (37.0, 37.0, 4.0)
    return exif


def _error(data: bytes, **options: int) -> str:
    with pytest.raises(MediaError) as caught:
        prepare_image(data, **options)
    message = str(caught.value)
    assert message.startswith("image: ")
    assert "\n" not in message
    return message


def _decoded(prepared: PreparedImage) -> Image.Image:
    image = Image.open(io.BytesIO(prepared.data))
    image.load()
    return image


def test_a_large_photo_with_gps_comes_out_small_jpeg_without_any_metadata() -> None:
    xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/">exif:GPSLatitude 55,45.35N</x:xmpmeta>'
    source = _encode(_photo(), "JPEG", quality=95, exif=_gps_exif(), xmp=xmp, comment=b"shot at home")
    assert Image.open(io.BytesIO(source)).getexif().get_ifd(0x8825)  # the GPS really was there
    assert b"GPSLatitude" in source and b"shot at home" in source

    prepared = prepare_image(source, max_side=1568, max_bytes=400_000)

    assert prepared.media_type == "image/jpeg"
    assert (prepared.width, prepared.height) == (1568, 1176)  # 4:3 kept
    assert len(prepared.data) <= 400_000
    out = _decoded(prepared)
    assert out.format == "JPEG" and out.size == (1568, 1176)
    assert not out.getexif()
    assert "exif" not in out.info and "xmp" not in out.info
    for secret in (b"Exif", b"PhoneMaker", b"GPSLatitude", b"shot at home"):
        assert secret not in prepared.data


def test_the_default_limits_hold_for_a_large_photo() -> None:
    prepared = prepare_image(_encode(_photo(3000, 4000), "JPEG", quality=95))
    assert max(prepared.width, prepared.height) <= 1568
    assert len(prepared.data) <= 3_750_000
    assert (prepared.width, prepared.height) == (1176, 1568)


def test_a_tight_byte_limit_is_met_by_stepping_quality_and_size_down() -> None:
    rng = random.Random(3)
    noise = Image.frombytes("RGB", (1200, 900), rng.randbytes(1200 * 900 * 3))
    prepared = prepare_image(_encode(noise, "JPEG", quality=95), max_bytes=60_000)
    assert prepared.media_type == "image/jpeg"
    assert len(prepared.data) <= 60_000
    assert _decoded(prepared).size == (prepared.width, prepared.height)


def test_an_impossible_byte_limit_is_a_one_line_refusal() -> None:
    assert "fit in 100 bytes" in _error(_encode(_photo(400, 300), "JPEG"), max_bytes=100)


def test_an_exif_rotated_photo_comes_out_upright() -> None:
    # Stored landscape, left half red, right half blue; orientation 6 means "turn 90° clockwise to view".
    stored = Image.new("RGB", (200, 100), BLUE)
    stored.paste(RED, (0, 0, 100, 100))
    exif = Image.Exif()
    exif[0x0112] = 6
    prepared = prepare_image(_encode(stored, "JPEG", quality=95, exif=exif))

    out = _decoded(prepared).convert("RGB")
    assert out.size == (100, 200)
    assert _close(out.getpixel((50, 20)), RED)  # the left edge went to the top
    assert _close(out.getpixel((50, 180)), BLUE)
    assert not out.getexif()


def test_a_transparent_png_stays_a_valid_png_with_its_transparency() -> None:
    image = Image.new("RGBA", (300, 200), (0, 0, 0, 0))
    ImageDraw.Draw(image).rectangle([50, 50, 250, 150], fill=(*RED, 255))
    prepared = prepare_image(_encode(image, "PNG"))

    assert prepared.media_type == "image/png"
    out = _decoded(prepared)
    assert out.mode == "RGBA" and out.size == (300, 200)
    assert out.getpixel((5, 5))[3] == 0
    assert out.getpixel((150, 100)) == (*RED, 255)


def test_a_transparent_png_too_big_for_png_becomes_a_flattened_jpeg() -> None:
    rng = random.Random(5)
    noise = Image.frombytes("RGBA", (800, 800), rng.randbytes(800 * 800 * 4))
    prepared = prepare_image(_encode(noise, "PNG"), max_bytes=200_000)
    assert prepared.media_type == "image/jpeg"
    assert len(prepared.data) <= 200_000
    assert _decoded(prepared).mode == "RGB"


def test_a_webp_sticker_is_accepted() -> None:
    sticker = Image.new("RGBA", (512, 512), (0, 0, 0, 0))
    ImageDraw.Draw(sticker).ellipse([56, 56, 456, 456], fill=(250, 200, 0, 255))
    prepared = prepare_image(_encode(sticker, "WEBP", lossless=True))
    out = _decoded(prepared)
    assert prepared.media_type == "image/png"
    assert out.size == (512, 512)
    assert out.getpixel((256, 256))[:3] == (250, 200, 0)
    assert out.getpixel((2, 2))[3] == 0


def test_an_opaque_screenshot_png_stays_lossless() -> None:
    screenshot = Image.new("RGB", (1080, 1920), (255, 255, 255))
    draw = ImageDraw.Draw(screenshot)
    for row in range(40, 1900, 60):
        draw.text((30, row), "Meeting moved to Thursday 15:00", fill=(0, 0, 0), font_size=36)
    text_chunks = PngImagePlugin.PngInfo()
    text_chunks.add_text("Author", "Ivan Petrov, +7 900 000-00-00")
    prepared = prepare_image(_encode(screenshot, "PNG", pnginfo=text_chunks, exif=_gps_exif()))
    assert prepared.media_type == "image/png"
    assert b"Ivan Petrov" not in prepared.data and b"PhoneMaker" not in prepared.data
    assert not _decoded(prepared).getexif()
    assert (prepared.width, prepared.height) == (882, 1568)
    assert _decoded(prepared).mode == "RGB"  # an all-opaque image carries no alpha channel


def test_other_modes_come_out_as_model_ready_images() -> None:
    cmyk = Image.new("CMYK", (120, 80), (0, 255, 255, 0))  # pure red in CMYK
    out = _decoded(prepare_image(_encode(cmyk, "JPEG", quality=95)))
    assert out.mode == "RGB"
    assert _close(out.getpixel((60, 40)), (255, 0, 0), tolerance=40)

    palette = Image.new("P", (64, 64), 0)
    palette.putpalette([*BLUE, *RED] + [0] * 762)
    palette.paste(1, (0, 0, 32, 64))
    out = _decoded(prepare_image(_encode(palette, "GIF")))
    assert out.getpixel((10, 10))[:3] == RED and out.getpixel((50, 10))[:3] == BLUE

    grey16 = Image.new("I;16", (50, 50), 60000)
    out = _decoded(prepare_image(_encode(grey16, "PNG")))
    assert out.mode == "L" and out.getpixel((25, 25)) == 255  # bright, not clipped to a meaningless value

    grey_alpha = Image.new("LA", (40, 40), (128, 0))
    out = _decoded(prepare_image(_encode(grey_alpha, "PNG")))
    assert out.mode == "RGBA" and out.getpixel((5, 5))[3] == 0


def test_an_animated_gif_is_seen_as_its_first_frame() -> None:
    frames = [Image.new("RGB", (80, 60), RED), Image.new("RGB", (80, 60), BLUE)]
    gif = _encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert Image.open(io.BytesIO(gif)).n_frames == 2
    prepared = prepare_image(gif)
    assert _close(_decoded(prepared).convert("RGB").getpixel((40, 30)), RED)


def test_image_block_is_an_anthropic_base64_block() -> None:
    prepared = prepare_image(_encode(_photo(200, 100), "JPEG"))
    block = image_block(prepared)
    assert block["type"] == "image"
    assert block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == "image/jpeg"
    assert base64.b64decode(block["source"]["data"]) == prepared.data


def test_corrupt_truncated_and_tiny_files_are_refused_in_one_line() -> None:
    rng = random.Random(11)
    assert "not a supported image format" in _error(rng.randbytes(5000))
    assert "not a supported image format" in _error(b"x")
    assert "empty" in _error(b"")

    jpeg = _encode(_photo(800, 600), "JPEG", quality=90)
    assert "truncated" in _error(jpeg[: len(jpeg) // 2])

    png = _encode(_photo(300, 200), "PNG")
    broken = png[:100] + bytes(200) + png[300:]
    _error(broken)


def test_a_decompression_bomb_is_refused_before_decoding() -> None:
    message = _error(_png_header(100_000, 100_000))
    assert "too many pixels" in message

    # Under Pillow's own limit but over ours: the declared size is named.
    message = _error(_png_header(9000, 9000))
    assert "9000x9000 is too many pixels" in message and "50 megapixels" in message


def test_animated_stickers_and_other_non_images_are_named() -> None:
    tgs = gzip.compress(json.dumps({"v": "5.5.2", "fr": 60, "layers": []}).encode())
    assert "animated sticker" in _error(tgs)
    assert "WebM" in _error(b"\x1a\x45\xdf\xa3" + bytes(60))
    assert "HEIC" in _error(b"\x00\x00\x00\x18ftypheic" + bytes(40))
    assert "PDF" in _error(b"%PDF-1.7\n" + bytes(40))


def _close(pixel: object, expected: tuple[int, int, int], tolerance: int = 25) -> bool:
    assert isinstance(pixel, tuple)
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], expected, strict=True))


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares a size and carries almost no pixel data: what a decompression bomb looks like."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )
