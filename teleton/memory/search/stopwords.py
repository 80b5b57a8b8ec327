"""Words too common to carry meaning in a keyword query.

OR-ing every word of a question ("what did she say about the trip?") would let "what", "the" and "about"
match half the archive; dropping them keeps BM25 on the words that discriminate. English and Russian are
covered because they are Telegram's two biggest languages here; other languages keep all their words.
"""

from __future__ import annotations

ENGLISH = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each ever few for from further get gets got had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is
    isn't it it's its itself just let's like me more most mustn't my myself no nor not now of off on once
    only or other ought our ours ourselves out over own same shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's these
    they they'd they'll they're they've this those through to too under until up us very was wasn't we
    we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom
    why why's will with won't would wouldn't you you'd you'll you're you've your yours yourself
    yourselves s t d ll m re ve
    """.split()
)

RUSSIAN = frozenset(
    """
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было
    вот от меня еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас
    нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для мы тебя их чем
    была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того потому этого какой
    совсем ним здесь этом один почти мой тем чтобы нее сейчас были куда зачем всех никогда можно при
    наконец два об другой хоть после над больше тот через эти нас про всего них какая много разве
    три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда
    конечно всю между
    """.split()
)

STOPWORDS = ENGLISH | RUSSIAN
