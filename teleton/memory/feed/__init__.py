"""The Telegram archive: messages, chats and users as stored, their vectors, and keyword search over them."""
