"""What a photo, a voice note or a document says, as text and as model input.

Nothing here imports Telethon or a model SDK: the Telegram layer downloads the bytes, this package turns them
into an image block, a transcript or extracted text, and the agent decides what the model sees.
"""
