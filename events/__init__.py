"""fleetwatch events: types and the immutable log. Depends on nothing else in fleetwatch."""
from events.types import EVENT_TYPES, Event, Unknown, decode_data, encode_data, tag_of  # noqa: F401
