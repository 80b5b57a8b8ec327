"""The conversation scripts/bench_cache.py plays: the chats, the scripted turns, the model that plays them and the
memory seeded before (a ``teleton memory import`` file), and the group chatter nobody asks the agent about."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.daemon.harness import OWNER
from tests.fakes.anthropic_server import Body, Reply, text, tool_use

MAIN_MODEL = "claude-test"
OWNER_DM = {"id": OWNER["id"], "type": "dm", "title": ""}
CLUB = {"id": -100_777, "type": "group", "title": "Chess club"}
ALLOTMENT = {"id": -100_778, "type": "group", "title": "Garden allotment"}
ANNA = {"id": 2001, "first_name": "Anna", "username": "anna_k"}
BEN = {"id": 2002, "first_name": "Ben", "username": "benji"}
CARLA = {"id": 2003, "first_name": "Carla", "username": "carla_m"}

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Turn:
    """One scripted turn: what is said, the tool calls (each step one response, one or more calls), the answer."""

    said: str
    answer: str
    steps: tuple[tuple[Call, ...], ...] = ()
    sender: dict[str, Any] = field(default_factory=lambda: OWNER)


def search(query: str) -> Call:
    return ("memory_search", {"query": query})


def recall(query: str) -> Call:
    return ("memory_recall", {"query": query})


def save(value: str, category: str, key: str | None = None) -> Call:
    return ("memory_save", {"value": value, "category": category, **({"key": key} if key else {})})


def read(target: str) -> Call:
    return ("memory_read", {"target": target})


DM: list[Turn] = [
    Turn("Good morning! What's on my plate today?", "Morning! The dentist is on Thursday, the chess club meets "
         "tonight at 7 and you wanted to call Anna about the sailing book.", ((read("recent"),),)),
    Turn("When exactly is the dentist appointment next week?", "Thursday at 9:30 with Dr. Varga, the "
         "clinic on Rua Augusta. Bring the insurance card."),
    Turn("Thanks. Remind me what we said about the cabin trip in March", "You booked the cabin at Lake Orta "
         "for March 14-17, Ben drives, and the wifi password is in your notes.",
         ((search("cabin trip March"),), (recall("cabin booking dates"),))),
    Turn("Who's bringing the kayak?", "Ben said he would bring his kayak if the weather holds."),
    Turn("ok. what was the name of the sailing book Anna recommended?", "\"The Riddle of the Sands\" by Erskine "
         "Childers; Anna lent you her copy in October.", ((search("sailing book Anna recommended"),),)),
    Turn("Please remember that I finished reading it last night", "Noted: you finished The Riddle of the Sands.",
         ((save("Finished reading The Riddle of the Sands", "books", "riddle_of_the_sands"),),)),
    Turn("How are the tomatoes doing, any notes from the allotment group?", "Carla wrote that the San Marzano "
         "plants need staking and that the watering rota changes next week.",
         ((search("tomatoes allotment watering"),), (search("San Marzano staking"),))),
    Turn("What's my budget for the holiday again?", "2,400 euros for flights and lodging, 600 for everything "
         "else; you have spent 1,150 so far.", ((recall("holiday budget"),),)),
    Turn("and how much did the Lisbon flight cost?", "The TAP flight was 312 euros return, booked on the 3rd."),
    Turn("Nice. Tell me a joke about chess players", "Why did the chess player bring a ladder? To reach the "
         "next rank."),
    Turn("Haha. What did the chess club decide about the tournament format?", "Swiss system, five rounds, "
         "rapid 15+10, starting January 10; Ben runs the pairings.",
         ((search("chess club tournament format"),), (search("tournament pairings Ben"),),
          (recall("chess tournament date"),))),
    Turn("Save that the tournament starts on January 10", "Saved: the tournament starts on January 10.",
         ((save("The chess club tournament starts on January 10", "chess", "tournament_start"),),)),
    Turn("What did I want to get my sister for her birthday?", "You thought of a ceramics workshop voucher or "
         "the blue scarf from the market; her birthday is December 19.",
         ((recall("sister birthday gift ideas"),), (search("birthday gift sister"),))),
    Turn("Let's go with the ceramics voucher", "Good choice: the studio on Rua da Rosa sells vouchers from 45 "
         "euros. Shall I note it?"),
    Turn("yes please", "Noted: the ceramics voucher for your sister's birthday.",
         ((save("Gift for my sister: a ceramics workshop voucher", "gift", "sister_gift"),),)),
    Turn("What's left to do on the bike repair?", "The rear brake pads are replaced; the chain still needs "
         "a new quick link, and the shop said Friday."),
    Turn("Which memory files do I have?", "MEMORY.md, notes on the cabin, the garden, chess and the budget, "
         "and the daily logs of yesterday and today.", ((read("list"),),)),
    Turn("Show me what MEMORY.md says about the garden", "It says you rent plot 14 at the allotment, share "
         "the watering rota with Carla and grow tomatoes, beans and basil.", ((read("memory"),),)),
    Turn("Cool, thanks", "You're welcome!"),
    Turn("What was the wifi password at the cabin?", "It is pinecone42, on the card by the fireplace.",
         ((search("cabin wifi password"),), (recall("wifi password"),))),
    Turn("Did Anna say anything about dinner on Saturday?", "Not that I can find; the last thing she wrote "
         "was about the book."),
    Turn("How many chess games did I win last month?", "Your notes say 7 wins, 3 draws and 2 losses in "
         "November.", ((recall("chess results November"),), (search("chess games won"),))),
    Turn("Save that I drew with Ben yesterday", "Saved: a draw with Ben.",
         ((save("Drew a game with Ben at the club", "chess"),),)),
    Turn("Remind me what time the club meets", "Tuesdays and Thursdays at 7 pm, in the library's back room."),
    Turn("What else is planned for this week?", "Thursday the dentist, Friday the bike, Saturday the "
         "allotment work day.", ((read("recent"),), (recall("plans this week"),))),
    Turn("Can you find what Carla said about the work day?", "She asked everyone to bring gloves and said "
         "the compost delivery comes at 10."),
    Turn("Any facts you have about my travel preferences?", "You prefer window seats, morning flights and "
         "no checked luggage.", ((recall("travel preferences"), recall("flight seat preference")),)),
    Turn("Great, that's all for now", "Talk soon!"),
    Turn("One more: what's the door code at the cabin?", "4471, the same as last year."),
    Turn("Thanks, good night", "Good night, Olga!"),
]  # fmt: skip


def group_turn(sender: dict[str, Any], said: str, answer: str, *steps: tuple[Call, ...]) -> Turn:
    return Turn(f"@teleton_agent {said}", answer, steps, sender)


GROUP: list[Turn] = [
    group_turn(ANNA, "when is the next tournament?", "January 10, Swiss system, five rounds.",
               (search("next chess tournament date"),)),
    group_turn(BEN, "how many rounds did we agree on?", "Five rounds of rapid, 15+10."),
    group_turn(CARLA, "who won the blitz night last week?", "Ben, with 6 of 7; Anna was second.",
               (search("blitz night winner"),)),
    group_turn(OWNER, "can you summarise what we said about the entry fee?", "5 euros for members, 8 for "
               "guests, paid on the day.", (search("tournament entry fee"),), (search("entry fee guests"),)),
    group_turn(ANNA, "thanks! and where do we play?", "In the library's back room, as usual."),
    group_turn(BEN, "do we have enough clocks?", "The club has 9 clocks; with 20 players you need 10, so "
               "one more.", (search("chess clocks count"),)),
    group_turn(CARLA, "I can bring one", "Great, that makes 10."),
    group_turn(OWNER, "what time do we start on the day?", "Registration at 9:30, round one at 10."),
    group_turn(ANNA, "who is doing the pairings?", "Ben runs the pairings."),
    group_turn(BEN, "correct. any rules about phones?", "Phones off in the playing room; a ringing phone "
               "loses the game."),
    group_turn(CARLA, "what about food?", "Anna offered to bring soup; everyone else brings a snack."),
    group_turn(OWNER, "remind everyone of the address please", "Rua do Norte 21, the library, back room on "
               "the ground floor.", (search("library address club"),)),
    group_turn(ANNA, "is there a prize?", "A book voucher for the winner and the rating points."),
    group_turn(BEN, "how many have signed up so far?", "14 names on the list, 6 places left.",
               (search("tournament sign up list"),), (search("signed up players"),)),
    group_turn(CARLA, "thanks, see you all there", "See you on the 10th!"),
]  # fmt: skip


class Model:
    """Plays the model: the turn from what the user typed, the step from the answers already given."""

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = turns
        self.not_offered: list[str] = []  # planned calls whose tool the request did not offer
        self.answered: set[int] = set()  # turns whose final text was given

    def __call__(self, body: Body) -> Reply:
        if body.get("model") != MAIN_MODEL:
            return text("A short summary of the conversation so far: plans, dates and what was decided.")
        where = self.where(body)
        if where is None:
            return text("ok")
        index, done = where
        turn = self.turns[index]
        offered = {tool.get("name") for tool in body.get("tools") or []}
        if done < len(turn.steps):
            step = turn.steps[done]
            missing = [name for name, _ in step if name not in offered]
            if not missing:
                return tool_use(*step)
            self.not_offered.extend(missing)
        self.answered.add(index)
        return text(turn.answer)

    def where(self, body: Body) -> tuple[int, int] | None:
        """(turn index, responses already given this turn), from the last user message that was typed. The
        retrieved context beside what was typed may quote earlier turns, never a later one: the latest wins."""
        done = 0
        for message in reversed(body.get("messages") or []):
            if message.get("role") == "assistant":
                done += 1
                continue
            said = _text(message.get("content"))
            matches = [i for i, turn in enumerate(self.turns) if turn.said in said]
            if matches:
                return max(matches), done
        return None


def _text(content: Any) -> str:
    """A user message's text blocks (a tool result's content is not what anyone typed)."""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


# -- the seeded memory ---------------------------------------------------------------------------------------

TOPICS = {
    "cabin": "Cabin at Lake Orta booked March 14-17; Ben drives; wifi pinecone42; door code 4471; kayak if dry.",
    "garden": "Plot 14 at the allotment; watering rota shared with Carla; tomatoes (San Marzano), beans, basil.",
    "chess": "Club meets Tue and Thu 7 pm in the library back room; tournament Jan 10, Swiss, 5 rounds, 15+10.",
    "budget": "Holiday budget 2,400 EUR flights and lodging, 600 EUR other; spent 1,150; Lisbon flight 312 EUR.",
}


def memory_md() -> str:
    """About 6,000 characters (~1.5k tokens): the curated notes of a year of use."""
    lines = ["# MEMORY", "", "Curated notes about Olga and her plans. Newest at the bottom.", ""]
    rng = random.Random(54)
    subjects = ["the cabin", "the allotment", "the chess club", "the budget", "Anna", "Ben", "Carla", "work",
                "the bike", "the flat", "the dentist", "books", "travel", "cooking"]  # fmt: skip
    month = 1
    while sum(len(line) + 1 for line in lines) < 6000:
        subject = rng.choice(subjects)
        verb = rng.choice(["keep", "change", "check", "plan", "drop"])
        what = rng.choice(["dates", "costs", "list", "order", "notes"])
        when = rng.choice(["weekly", "on the day", "a day before", "monthly"])
        day = f"2026-{month:02d}-{rng.randint(1, 28):02d}"
        lines.append(f"- {day}: about {subject}, Olga decided to {verb} the {what} and asked to be reminded {when}.")
        month = month % 12 + 1
    return "\n".join(lines) + "\n"


def daily_log(day: datetime, exchanges: int) -> str:
    """A day's log as the daemon writes it: one ``[HH:MM] User: … | Assistant: …`` line an exchange."""
    rng = random.Random(day.toordinal())
    lines = []
    for n in range(exchanges):
        topic, note = rng.choice(sorted(TOPICS.items()))
        lines.append(f"[{8 + n // 3:02d}:{(n * 17) % 60:02d}] User: a question about the {topic} | "
                     f"Assistant: {note[:120]}")  # fmt: skip
    return "\n".join(lines) + "\n"


def memory_export(now: datetime) -> dict[str, Any]:
    """A ``teleton memory export`` document: files, facts and an earlier session's summary."""
    files = {"MEMORY.md": memory_md()}
    for topic, note in TOPICS.items():
        body = "\n".join(f"- {part.strip()}" for part in note.split(";"))
        files[f"memory/{topic}.md"] = f"# {topic.title()}\n\n{body}\n\n" + "Details kept over the year.\n" * 20
    yesterday = now - timedelta(days=1)
    files[f"memory/{yesterday:%Y-%m-%d}.md"] = daily_log(yesterday, 18)
    files[f"memory/{now:%Y-%m-%d}.md"] = daily_log(now, 6)
    stamp = now.timestamp() - 86_400 * 30
    facts = [
        ("travel", "seat", "Prefers window seats and morning flights", 0.6),
        ("travel", "luggage", "Travels without checked luggage", 0.5),
        ("health", "dentist", "Dentist: Dr. Varga, Thursday 9:30, clinic on Rua Augusta", 0.7),
        ("chess", "results_november", "November chess: 7 wins, 3 draws, 2 losses", 0.5),
        ("chess", "club_times", "Chess club meets Tuesdays and Thursdays at 7 pm", 0.6),
        ("family", "sister_birthday", "Sister's birthday is December 19", 0.9),
        ("gift", "ideas", "Gift ideas for the sister: ceramics workshop voucher or the blue scarf", 0.5),
        ("budget", "holiday", "Holiday budget: 2,400 EUR flights and lodging, 600 EUR other", 0.6),
        ("travel", "lisbon_flight", "TAP flight to Lisbon, 312 EUR return, booked on the 3rd", 0.5),
        ("cabin", "wifi", "Cabin wifi password: pinecone42", 0.5),
        ("cabin", "door", "Cabin door code: 4471", 0.5),
        ("garden", "plot", "Rents plot 14 at the allotment", 0.5),
        ("people", "anna", "Anna lent her copy of The Riddle of the Sands in October", 0.4),
        ("food", "diet", "Olga is allergic to peanuts", 0.95),
        ("work", "hours", "Works from home on Mondays and Fridays", 0.4),
    ]  # fmt: skip
    rows: list[dict[str, Any]] = [
        {"id": n + 1, "superseded_by": None, "category": category, "key": key, "value": value, "scope": "owner",
         "subject": "owner", "source": "agent", "importance": importance, "created_at": stamp + n,
         "updated_at": stamp + n, "valid_from": stamp + n, "valid_until": None, "sources": []}
        for n, (category, key, value, importance) in enumerate(facts)
    ]  # fmt: skip
    summary = ("Earlier session: Olga planned the cabin trip with Ben, compared flights to Lisbon and chose "
               "TAP, and asked to be reminded about the dentist and her sister's birthday.")  # fmt: skip
    entries = [{"source": "session", "path": f"sessions/{OWNER['id']}/1", "heading": "", "text": summary,
                "label": "owner"}]  # fmt: skip
    return {"format": "teleton-memory", "version": 1, "exported_at": now.timestamp(), "facts": rows,
            "entries": entries, "files": files}  # fmt: skip


def chatter(rng: random.Random) -> list[tuple[dict[str, Any], dict[str, Any], str]]:
    """300 group messages nobody asks the agent about: (chat, sender, text)."""
    club = ["who has the spare clock?", "I played the Caro-Kann again, lost in 30 moves", "blitz tonight?",
            "Ben won the blitz night, 6 of 7", "entry fee is 5 for members, 8 for guests", "the library closes at 10",
            "sign-up list has {n} names", "I can bring a board", "anyone up for analysis on Sunday?",
            "the pairings will be posted on Friday", "phones off during games please"]  # fmt: skip
    garden = [
        "the San Marzano need staking",
        "watering rota changes next week",
        "compost delivery at 10",
        "bring gloves on Saturday",
        "the beans are flowering",
        "who took the hose?",
        "slugs again on plot {n}",
    ]
    out = []
    for n in range(300):
        chat, lines = (CLUB, club) if n % 3 else (ALLOTMENT, garden)
        sender = (ANNA, BEN, CARLA)[rng.randrange(3)]
        out.append((chat, sender, rng.choice(lines).format(n=rng.randint(2, 30))))
    return out
