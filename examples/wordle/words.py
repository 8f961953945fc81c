"""A small built-in list of common five-letter English words (upper case, no duplicates)."""

# fmt: off
WORDS: tuple[str, ...] = (
    "ABOUT", "ABOVE", "AFTER", "AGAIN", "ALONG", "APPLE", "BEACH", "BLACK", "BOARD", "BREAD",
    "BRING", "BROWN", "BUILD", "CARRY", "CATCH", "CHAIR", "CHEAP", "CHILD", "CLEAN", "CLEAR",
    "CLOCK", "CLOSE", "CLOUD", "COUNT", "CRANE", "DANCE", "DREAM", "DRINK", "EARTH", "EMPTY",
    "ENJOY", "EVERY", "FIELD", "FIRST", "FLOOR", "FRESH", "FRUIT", "GHOST", "GIVEN", "GLASS",
    "GREAT", "GREEN", "GROUP", "HAPPY", "HEART", "HEAVY", "HORSE", "HOTEL", "HOUSE", "LARGE",
    "LAUGH", "LEARN", "LEVEL", "LIGHT", "LUNCH", "MONEY", "MONTH", "MUSIC", "NEVER", "NIGHT",
    "NORTH", "OCEAN", "OFTEN", "ORDER", "OTHER", "PAPER", "PARTY", "PEACE", "PHONE", "PIANO",
    "PLACE", "PLANT", "POINT", "QUICK", "QUIET", "RADIO", "RIGHT", "RIVER", "ROBOT", "ROUND",
    "SHARE", "SHEEP", "SLEEP", "SMALL", "SMILE", "SOUND", "SOUTH", "SPEED", "SPOON", "STONE",
    "STORY", "SUGAR", "TABLE", "TEETH", "THING", "THREE", "TRAIN", "WATER", "WHITE", "WORLD",
    "YOUNG",
)
# fmt: on
