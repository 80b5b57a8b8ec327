"""Word error rate and speed of the local transcriber on clips spoken by eSpeak NG, made at run time.

    python scripts/bench_transcribe.py [--model whisper-base | --model-path DIR] [--beam 5] [--languages en,es]

The clips are OGG/Opus voice notes as Telegram sends them, made by Teleton's own local voice (eSpeak NG from
the ``espeakng-loader`` wheel, ``teleton/media/speech_local.py``): nothing to install. Each sentence below
is spoken in one or two voices and speeds, transcribed by the same code the daemon runs (decode, windows,
language detection), and scored against its text. Prints one JSON object on stdout (WER overall and per
language, seconds of audio per second of compute, model load time); progress goes to stderr.

Synthetic speech is clean and regular: these figures say the pipeline works and how fast it is on this
machine, not what a noisy voice note from a street will get.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a clone without installing

from teleton.media.audio import decode
from teleton.media.speech_local import LocalSpeech
from teleton.media.transcribe_local import LocalSettings, from_settings

log = logging.getLogger("bench_transcribe")

# (language, espeak voices, sentences): no digits, so "nine" vs "9" is never counted as an error.
CORPUS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (
        "en",
        ("en-us", "en-gb"),
        (
            "The receipt from the hardware store is in the blue folder.",
            "Please call the dentist on Thursday morning about the broken tooth.",
            "We should leave early because the train to the airport is often late.",
            "My sister bought a new bicycle and rides it to work every day.",
            "Could you send me the photos from the wedding when you have time?",
            "The meeting with the landlord was moved to next Friday afternoon.",
            "Remember to water the plants and feed the cat while I am away.",
            "The doctor said I should drink more water and sleep longer.",
            "I left my keys on the kitchen table next to the coffee machine.",
            "The weather tomorrow will be cold and windy with some rain in the evening.",
        ),
    ),
    (
        "es",
        ("es-419", "es"),
        (
            "La reunión con el médico es el martes por la tarde.",
            "Mañana compramos pan, leche y naranjas en el mercado.",
            "Mi hermano vive en una casa grande cerca del río.",
            "No olvides llamar a tu madre el domingo por la noche.",
        ),
    ),
    (
        "ru",
        ("ru",),
        (
            "Квитанция из хозяйственного магазина лежит в синей папке.",
            "Позвони мне завтра утром, когда приедешь в город.",
            "Сегодня очень холодно, поэтому я остался дома.",
        ),
    ),
    (
        "de",
        ("de",),
        (
            "Der Termin beim Arzt ist am Dienstag am Nachmittag.",
            "Wir fahren am Wochenende mit dem Zug nach Berlin.",
        ),
    ),
    (
        "fa",
        ("fa",),
        (
            "رسید فروشگاه در پوشه آبی است.",
            "فردا صبح به من زنگ بزن.",
        ),
    ),
]


def normalise(text: str) -> list[str]:
    """Lower case, punctuation dropped (any script), accents kept: "¿Mañana?" -> ["mañana"]."""
    text = unicodedata.normalize("NFC", text.lower())
    kept = "".join(ch if unicodedata.category(ch)[0] in "LNM" else " " for ch in text)
    return kept.split()


def edit_distance(reference: list[str], hypothesis: list[str]) -> int:
    previous = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        current = [i] + [0] * len(hypothesis)
        for j, hyp in enumerate(hypothesis, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ref != hyp))
        previous = current
    return previous[-1]


async def make_clips(folder: Path, languages: set[str] | None, speeds: tuple[int, ...]) -> list[dict]:
    speech = LocalSpeech()
    clips = []
    try:
        for language, voices, sentences in CORPUS:
            if languages and language not in languages:
                continue
            for n, sentence in enumerate(sentences):
                # Alternate voices and speeds so no two neighbouring clips sound alike.
                voice, speed = voices[n % len(voices)], speeds[n % len(speeds)]
                path = folder / f"{language}-{n:02d}.ogg"
                path.write_bytes(await speech.synthesize(sentence, voice=voice, words_per_minute=speed))
                clips.append({"language": language, "voice": voice, "speed": speed, "text": sentence, "path": path})
    finally:
        await speech.aclose()
    log.info("made %d OGG/Opus clips in %s", len(clips), folder)
    return clips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="packaged model: whisper-base (default) or whisper-tiny.en")
    parser.add_argument("--model-path", default=None, help="a faster-whisper model directory instead")
    parser.add_argument("--beam", type=int, default=LocalSettings.beam_size)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--compute-type", default=LocalSettings.compute_type, help="int8, float32, int8_float32")
    parser.add_argument("--languages", default=None, help="comma-separated subset, e.g. en,es")
    parser.add_argument(
        "--given-language", action="store_true", help="tell the model each clip's language instead of detecting it"
    )
    parser.add_argument("--speeds", default="150,130,170", help="espeak-ng words per minute, cycled")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")

    languages = set(args.languages.split(",")) if args.languages else None
    speeds = tuple(int(s) for s in args.speeds.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-stt-") as tmp:
        clips = asyncio.run(make_clips(Path(tmp), languages, speeds))
        settings = LocalSettings(beam_size=args.beam, threads=args.threads, compute_type=args.compute_type)
        transcriber = from_settings(args.model, args.model_path, settings)
        started = time.perf_counter()
        transcriber.load_sync()
        load_s = time.perf_counter() - started
        log.info("model %s loaded in %.2f s", transcriber.provider, load_s)
        # Warm-up (first-call allocations are not speed) on the last clip: the model keeps its last encoder
        # output, and a warm-up on the first clip would hand that clip a free pass.
        transcriber.transcribe_sync(clips[-1]["path"])
        load_before = os.getloadavg()[0]

        rows = []
        for clip in clips:
            started, cpu_started = time.perf_counter(), time.process_time()
            given = clip["language"] if args.given_language else None
            transcript = transcriber.transcribe_sync(clip["path"], given)
            seconds = time.perf_counter() - started
            cpu_seconds = time.process_time() - cpu_started
            reference, hypothesis = normalise(clip["text"]), normalise(transcript.text)
            errors = edit_distance(reference, hypothesis)
            audio_s = decode(clip["path"]).duration_s
            rows.append(
                {
                    **clip,
                    "path": clip["path"].name,
                    "hypothesis": transcript.text,
                    "detected": transcript.language,
                    "words": len(reference),
                    "errors": errors,
                    "audio_s": audio_s,
                    "compute_s": seconds,
                    "cpu_s": cpu_seconds,
                }
            )
            log.info(
                "%s %-6s wer %.2f %.2fs/%.2fs  %s",
                clip["language"],
                transcript.language,
                errors / len(reference),
                seconds,
                audio_s,
                transcript.text,
            )
        transcriber.close()

    def summary(subset: list[dict]) -> dict:
        words = sum(r["words"] for r in subset)
        audio = sum(r["audio_s"] for r in subset)
        compute = sum(r["compute_s"] for r in subset)
        cpu = sum(r["cpu_s"] for r in subset)
        return {
            "clips": len(subset),
            "words": words,
            "wer": round(sum(r["errors"] for r in subset) / words, 4),
            "language_detected_right": sum(r["detected"] == r["language"] for r in subset),
            "audio_s": round(audio, 1),
            "audio_seconds_per_compute_second": round(audio / compute, 2),
            # CPU seconds of this process, all threads: what the figure would be on one free core.
            "audio_seconds_per_cpu_second": round(audio / cpu, 2),
        }

    result = {
        "model": transcriber.provider,
        "beam_size": args.beam,
        "language": "given" if args.given_language else "detected",
        "compute_type": transcriber.settings.compute_type,
        "threads": args.threads or "all cores",
        "model_load_s": round(load_s, 2),
        # Other work on the machine slows the wall-clock figures: its 1-minute load average, before and after.
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "cores": os.cpu_count(),
        "overall": summary(rows),
        "per_language": {
            lang: summary([r for r in rows if r["language"] == lang])
            for lang in dict.fromkeys(r["language"] for r in rows)
        },
        "clips": [
            {k: r[k] for k in ("path", "voice", "speed", "text", "hypothesis", "detected", "errors", "words")}
            for r in rows
        ],
    }
    json.dump(result, sys.stdout, ensure_ascii=False, indent=2)
    print()


if __name__ == "__main__":
    main()
