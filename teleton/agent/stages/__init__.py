"""The stages of a turn, in the order runtime.py runs them: read the media, build the context within the memory
budget, assemble the prompt, answer, reply (in voice too), and the aftercare a turn leaves behind."""
