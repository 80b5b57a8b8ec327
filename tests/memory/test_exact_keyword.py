"""A keyword-shaped query's rare word, matched exactly, ranks first (issue 56, point 7): the real e5 model, a
real store, the weights the daemon uses."""

from __future__ import annotations

from teleton.config.schema import Config
from teleton.memory.embeddings.query import embed_query
from teleton.memory.feed.embedding import embed_pending
from teleton.memory.feed.search import search_feed
from teleton.memory.search.hybrid import configured_params
from teleton.storage import Database

# One chat, a minute apart: each message is indexed with the two before it, so the two replies after the
# lighthouse message carry its word in their keyword context and its meaning in their vectors.
CHAT = [
    "Did you pay the electricity bill? The reminder came again this morning and I think the late fee starts on "
    "Monday, so better sooner than later",
    "Yes, paid it this morning, and the water bill too while I was at it. How was the trip down south, did the car "
    "behave?",
    "Back from the weekend: the car was fine, the hotel too, we visited my aunt and her dogs, and on Sunday we "
    "passed the lighthouse, then stuck in traffic for 3 hours",
    "Oh, the tall white tower on the cliffs whose lamp flashes over the sea at night?",
    "That one! Its beam still guides the ships past the rocks",
    "Meeting at 3?",
    "Can you send me the report by Friday?",
    "My cat knocked over the plant again",
    "Let's get pizza tonight",
    "Going to the gym later",
]
# Days later, each a conversation of its own: the sea, boats and lights, never the word.
LATER = [
    "The beacon on the rocks flashed every few seconds through the fog",
    "Lights of the harbour reflected on the dark water",
    "A lonely keeper lived in the tower by the sea for thirty years",
    "The ships used the light on the cape to avoid the reef",
    "Foghorn sounded all night from the point",
    "We took the ferry across the bay and watched the shoreline",
    "Sailors relied on the flashing beacon near the harbour entrance",
    "The waves crashed against the sea wall during the storm",
    "A lamp on the pier lit the way for boats coming home",
    "Sunset over the ocean with a sailboat on the horizon",
    "The signal light at the port entrance turns green when it's safe",
    "Beacon towers lined the coast in the old days to warn ships",
    "The night watchman on the coast kept the lantern burning",
    "My uncle has a small sailing boat, we took it out past the bay",
    "The marina was full of yachts this weekend",
    "Grandpa used to be a sailor, he tells stories about storms at sea",
    "The navigation light on the buoy was broken",
    "We saw dolphins from the ferry deck",
    "Dinner at the seafood place near the docks?",
    "Stars were so bright away from the city lights",
]
SAYS_IT = CHAT[2]
REPLY = CHAT[4]
START = 1_700_000_000.0


def archive(conn) -> None:
    rows = [(n, START + n * 60, text) for n, text in enumerate(CHAT)]
    rows += [(len(CHAT) + n, START + (n + 2) * 86_400, text) for n, text in enumerate(LATER)]
    for n, date, text in rows:
        conn.execute(
            "insert into tg_messages(chat_id, message_id, sender_name, date, text) values (1, ?, 'Ann', ?, ?)",
            (n + 1, date, text),
        )


async def search(db: Database, embedder, query: str) -> list[str]:
    params = configured_params(Config())  # the default model's own weights: vector 0.8, keyword 0.2
    vector = await embed_query(embedder, query)
    hits = await search_feed(db, query, chat_ids=[1], params=params, query_vector=vector)
    return [h.text for h in hits]


async def test_the_message_saying_a_rare_word_ranks_first_for_that_word(mdb: Database, embedder):
    await mdb.write(archive)
    await embed_pending(mdb, embedder)
    # Before the rule the reply after it, which has the word only in its context (and the lighthouse message's
    # meaning in its vector), ranked first. The reply is still found, right after it.
    assert (await search(mdb, embedder, "lighthouse"))[:2] == [SAYS_IT, REPLY]
    assert (await search(mdb, embedder, "Lighthouses"))[:2] == [SAYS_IT, REPLY]  # stemmed, as the index matches
    assert (await search(mdb, embedder, "lighthouse weekend"))[0] == SAYS_IT  # every word, not the likeliest one

    # A question asks by meaning: the reply telling what a lighthouse does stays above the message that only
    # names it, with or without its question mark.
    for question in ("What is a lighthouse?", "what is a lighthouse"):
        assert (await search(mdb, embedder, question))[:2] == [REPLY, SAYS_IT]
