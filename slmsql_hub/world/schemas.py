"""The embedded world's databases, described once: tables, typed columns with a *role* (what kind of value
they hold, which decides how data is generated and which question templates apply), foreign keys, and the
words questions use for them.

Column phrases default to the column name with underscores replaced by spaces, and table nouns are the table
name (plural adds "s"), so the words of a question map systematically onto the schema: a small model can
learn the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

# Column roles
ID = "id"  # INTEGER PRIMARY KEY
LABEL = "label"  # unique human-readable text naming a row (name, title, plate)
CATEGORY = "category"  # text from a small closed set
NUMBER = "number"  # integer or real measure
DATE = "date"  # ISO date text, YYYY-MM-DD
FK = "fk"  # INTEGER REFERENCES parent (parent_id)


@dataclass(frozen=True)
class Column:
    """One column of a world table.

    Args:
        role: one of the roles above.
        gen: how values are generated (see :mod:`~slmsql_hub.world.populate`): for ``label``
            ``("person",)``, ``("combo", first_words, second_words)``, ``("code", prefix)`` or
            ``("fixed", values)``; for ``category`` ``("choice", values)`` or ``("by_label", ((label, value), ...))``;
            for ``number`` ``(low, high)`` (integers) or ``(low, high, decimals)``; for ``date``
            ``(first_year, last_year)``; for ``fk`` the share of parent rows that get no child row.
        references: the parent table of a ``fk`` column (whose primary key is ``<parent>_id``).
        phrase: the words questions use for the column (default: the name with spaces).
        adjective: for ``number`` columns, ``(word, operator, threshold)`` used by evidence questions
            ("long books" -> ``pages > 400``).
        additive: whether a total (``sum``) of the column means something.
    """

    name: str
    role: str
    gen: tuple = ()
    references: str | None = None
    phrase: str = ""
    adjective: tuple[str, str, float] | None = None
    additive: bool = True

    @property
    def words(self) -> str:
        return self.phrase or self.name.replace("_", " ")

    @property
    def sql_type(self) -> str:
        if self.role in (ID, FK):
            return "INTEGER"
        if self.role == NUMBER:
            return "REAL" if len(self.gen) > 2 and self.gen[2] > 0 else "INTEGER"
        return "TEXT"


@dataclass(frozen=True)
class Table:
    """One world table: ``name`` is a singular noun (``plural`` when not ``name + "s"``), ``rows`` its row count
    (a ``("fixed", values)`` label overrides it), ``columns`` start with the ``id`` one."""

    name: str
    rows: int
    columns: tuple[Column, ...]
    plural: str = ""

    @property
    def singular(self) -> str:
        return self.name.replace("_", " ")

    @property
    def plural_words(self) -> str:
        return self.plural or self.singular + "s"

    @property
    def pk(self) -> Column:
        return next(c for c in self.columns if c.role == ID)

    @property
    def label(self) -> Column | None:
        return next((c for c in self.columns if c.role == LABEL), None)

    def by_role(self, role: str) -> list[Column]:
        return [c for c in self.columns if c.role == role]


@dataclass(frozen=True)
class DatabaseSpec:
    """One world database: an id (``<db_id>/<db_id>.sqlite``) and its tables, parents before children."""

    db_id: str
    tables: tuple[Table, ...]
    description: str = ""

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    def foreign_keys(self) -> list[tuple[Table, Column, Table]]:
        """``(child table, fk column, parent table)`` for every foreign key, in declaration order."""
        return [(t, c, self.table(c.references)) for t in self.tables for c in t.columns if c.role == FK]


def create_table_sql(table: Table) -> str:
    """The ``CREATE TABLE`` statement of a world table (foreign keys inline, one column per line).

    Example:

    ```python
    >>> from slmsql_hub.world.schemas import DATABASES, create_table_sql
    >>> print(create_table_sql(DATABASES[0].tables[0]))
    CREATE TABLE author (
      author_id INTEGER PRIMARY KEY,
      name TEXT NOT NULL UNIQUE,
      country TEXT,
      birth_year INTEGER
    )

    ```
    """
    parts = []
    for column in table.columns:
        if column.role == ID:
            parts.append(f"{column.name} INTEGER PRIMARY KEY")
        elif column.role == FK:
            parent = column.references
            parts.append(f"{column.name} INTEGER REFERENCES {parent} ({parent}_id)")
        elif column.role == LABEL:
            parts.append(f"{column.name} TEXT NOT NULL UNIQUE")
        else:
            parts.append(f"{column.name} {column.sql_type}")
    body = ",\n  ".join(parts)
    return f"CREATE TABLE {table.name} (\n  {body}\n)"


_FIRST = (
    "Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Keiko", "Luis",
    "Maya", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wendy", "Xavier",
    "Yara", "Zane", "Amir", "Bea", "Cyril", "Dalia", "Emil", "Fiona", "Goran", "Hana", "Igor", "Julia",
)  # fmt: skip
_LAST = (
    "Adler", "Brandt", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Horvat", "Ivanova", "Jensen",
    "Kowalski", "Larsen", "Moreau", "Novak", "Okafor", "Petrov", "Quispe", "Rossi", "Silva", "Tanaka",
    "Ueda", "Varga", "Weber", "Xu", "Yilmaz", "Zhou", "Alves", "Berg", "Nakamura", "Lindqvist",
)  # fmt: skip
PERSON_NAMES = (_FIRST, _LAST)

_CITIES = ("Leeds", "York", "Bath", "Derby", "Hull", "Exeter")
_CROPS = {
    "Wheat": "grain", "Barley": "grain", "Oats": "grain", "Rye": "grain", "Corn": "grain",
    "Potato": "vegetable", "Carrot": "vegetable", "Cabbage": "vegetable", "Onion": "vegetable",
    "Leek": "vegetable", "Apple": "fruit", "Pear": "fruit", "Plum": "fruit", "Cherry": "fruit",
}  # fmt: skip

LIBRARY = DatabaseSpec(
    db_id="library",
    description="A public library: authors, their books, members and the loans of books to members.",
    tables=(
        Table(
            "author",
            32,
            (
                Column("author_id", ID),
                Column("name", LABEL, ("person",)),
                Column(
                    "country", CATEGORY, ("choice", ("France", "Italy", "Japan", "Brazil", "Canada", "Kenya"))
                ),
                Column("birth_year", NUMBER, (1930, 1995)),
            ),
        ),
        Table(
            "book",
            90,
            (
                Column("book_id", ID),
                Column(
                    "title",
                    LABEL,
                    (
                        "combo",
                        (
                            "Silent",
                            "Broken",
                            "Hidden",
                            "Golden",
                            "Last",
                            "Winter",
                            "Iron",
                            "Paper",
                            "Distant",
                            "Crimson",
                            "Quiet",
                        ),
                        (
                            "Harbor",
                            "Garden",
                            "River",
                            "Crown",
                            "Letter",
                            "Forest",
                            "Bridge",
                            "Mirror",
                            "Island",
                            "Lantern",
                            "Voyage",
                        ),
                    ),
                ),
                Column("genre", CATEGORY, ("choice", ("Mystery", "Fantasy", "History", "Poetry", "Science"))),
                Column("pages", NUMBER, (90, 900), adjective=("long", ">", 500)),
                Column("year_published", NUMBER, (1960, 2023)),
                Column("author_id", FK, (0.15,), references="author"),
            ),
        ),
        Table(
            "member",
            60,
            (
                Column("member_id", ID),
                Column("name", LABEL, ("person",)),
                Column("city", CATEGORY, ("choice", _CITIES)),
                Column("join_year", NUMBER, (2010, 2024)),
            ),
        ),
        Table(
            "loan",
            210,
            (
                Column("loan_id", ID),
                Column("book_id", FK, (0.2,), references="book"),
                Column("member_id", FK, (0.1,), references="member"),
                Column("loan_date", DATE, (2022, 2024)),
                Column("days_kept", NUMBER, (1, 45), adjective=("overdue", ">", 28)),
            ),
        ),
    ),
)

_CLINIC = DatabaseSpec(
    db_id="clinic",
    description="A medical clinic: doctors, patients and their appointments.",
    tables=(
        Table(
            "doctor",
            18,
            (
                Column("doctor_id", ID),
                Column("name", LABEL, ("person",)),
                Column(
                    "specialty",
                    CATEGORY,
                    ("choice", ("Cardiology", "Dermatology", "Pediatrics", "Neurology", "Oncology")),
                ),
                Column("years_experience", NUMBER, (1, 35), adjective=("senior", ">=", 20), additive=False),
            ),
        ),
        Table(
            "patient",
            70,
            (
                Column("patient_id", ID),
                Column("name", LABEL, ("person",)),
                Column("city", CATEGORY, ("choice", _CITIES)),
                Column("blood_type", CATEGORY, ("choice", ("A+", "A-", "B+", "O+", "O-", "AB+"))),
                Column("birth_year", NUMBER, (1940, 2020)),
            ),
        ),
        Table(
            "appointment",
            220,
            (
                Column("appointment_id", ID),
                Column("doctor_id", FK, (0.1,), references="doctor"),
                Column("patient_id", FK, (0.15,), references="patient"),
                Column("visit_date", DATE, (2023, 2024)),
                Column("fee", NUMBER, (40, 300), adjective=("expensive", ">", 200)),
                Column(
                    "status",
                    CATEGORY,
                    ("choice", ("completed", "completed", "completed", "cancelled", "missed")),
                ),
            ),
        ),
    ),
)

_BIKE_RENTAL = DatabaseSpec(
    db_id="bike_rental",
    description="A city bike-rental scheme: docking stations, bikes, riders and trips.",
    tables=(
        Table(
            "station",
            24,
            (
                Column("station_id", ID),
                Column(
                    "name",
                    LABEL,
                    (
                        "combo",
                        ("Harbor", "Market", "Castle", "Mill", "Park", "Canal", "Tower", "Chapel"),
                        ("Square", "Street", "Gate", "Bridge", "Lane", "Yard"),
                    ),
                ),
                Column(
                    "district", CATEGORY, ("choice", ("Old Town", "Riverside", "University", "Docklands"))
                ),
                Column("capacity", NUMBER, (8, 40), adjective=("large", ">=", 30)),
            ),
        ),
        Table(
            "bike",
            80,
            (
                Column("bike_id", ID),
                Column("serial_number", LABEL, ("code", "BK-")),
                Column("model", CATEGORY, ("choice", ("City", "Cargo", "Electric", "Mountain"))),
                Column("purchase_year", NUMBER, (2015, 2024)),
                Column("station_id", FK, (0.15,), references="station"),
            ),
        ),
        Table(
            "rider",
            60,
            (
                Column("rider_id", ID),
                Column("name", LABEL, ("person",)),
                Column("membership", CATEGORY, ("choice", ("annual", "monthly", "casual"))),
                Column("age", NUMBER, (16, 75), adjective=("young", "<", 25), additive=False),
            ),
        ),
        Table(
            "trip",
            250,
            (
                Column("trip_id", ID),
                Column("bike_id", FK, (0.1,), references="bike"),
                Column("rider_id", FK, (0.1,), references="rider"),
                Column("trip_date", DATE, (2024, 2024)),
                Column("duration_min", NUMBER, (3, 120)),
                Column("distance_km", NUMBER, (0.5, 30.0, 1), adjective=("long", ">", 15)),
            ),
        ),
    ),
)

_MUSIC_SCHOOL = DatabaseSpec(
    db_id="music_school",
    description="A music school: teachers, students and the lessons they share.",
    tables=(
        Table(
            "teacher",
            16,
            (
                Column("teacher_id", ID),
                Column("name", LABEL, ("person",)),
                Column(
                    "instrument",
                    CATEGORY,
                    ("choice", ("Piano", "Violin", "Guitar", "Cello", "Flute", "Drums")),
                ),
                Column("hourly_rate", NUMBER, (20, 90), adjective=("expensive", ">", 60), additive=False),
            ),
        ),
        Table(
            "student",
            70,
            (
                Column("student_id", ID),
                Column("name", LABEL, ("person",)),
                Column("level", CATEGORY, ("choice", ("beginner", "intermediate", "advanced"))),
                Column("age", NUMBER, (6, 70), adjective=("adult", ">=", 18), additive=False),
            ),
        ),
        Table(
            "lesson",
            240,
            (
                Column("lesson_id", ID),
                Column("teacher_id", FK, (0.1,), references="teacher"),
                Column("student_id", FK, (0.15,), references="student"),
                Column("lesson_date", DATE, (2023, 2024)),
                Column("minutes", NUMBER, (20, 90), adjective=("long", ">=", 60)),
            ),
        ),
    ),
)

_LOGISTICS_DEPOT = DatabaseSpec(
    db_id="logistics_depot",
    description="A logistics company: depots, their trucks and drivers, and shipments.",
    tables=(
        Table(
            "depot",
            12,
            (
                Column("depot_id", ID),
                Column(
                    "name",
                    LABEL,
                    (
                        "combo",
                        ("North", "South", "East", "West", "Central", "Harbor"),
                        ("Depot", "Hub", "Terminal"),
                    ),
                ),
                Column("city", CATEGORY, ("choice", ("Lyon", "Turin", "Graz", "Ghent", "Porto"))),
                Column("area_sqm", NUMBER, (800, 9000)),
            ),
        ),
        Table(
            "truck",
            45,
            (
                Column("truck_id", ID),
                Column("plate", LABEL, ("code", "TR-")),
                Column("brand", CATEGORY, ("choice", ("Volvo", "Scania", "Iveco", "Renault", "Tatra"))),
                Column("capacity_kg", NUMBER, (3000, 26000), adjective=("heavy", ">", 18000)),
                Column("depot_id", FK, (0.1,), references="depot"),
            ),
        ),
        Table(
            "driver",
            50,
            (
                Column("driver_id", ID),
                Column("name", LABEL, ("person",)),
                Column("license_class", CATEGORY, ("choice", ("C", "CE", "C1"))),
                Column("hire_year", NUMBER, (2005, 2024)),
                Column("depot_id", FK, (0.1,), references="depot"),
            ),
        ),
        Table(
            "shipment",
            240,
            (
                Column("shipment_id", ID),
                Column("truck_id", FK, (0.1,), references="truck"),
                Column("driver_id", FK, (0.1,), references="driver"),
                Column(
                    "destination", CATEGORY, ("choice", ("Milan", "Vienna", "Zurich", "Munich", "Prague"))
                ),
                Column("weight_kg", NUMBER, (200, 20000), adjective=("heavy", ">", 12000)),
                Column("ship_date", DATE, (2023, 2024)),
            ),
        ),
    ),
)

_FARM_COOP = DatabaseSpec(
    db_id="farm_coop",
    description="A farming co-operative: member farms, the crops they grow and their harvests.",
    tables=(
        Table(
            "farm",
            26,
            (
                Column("farm_id", ID),
                Column(
                    "name",
                    LABEL,
                    (
                        "combo",
                        ("Willow", "Oak", "Stone", "Meadow", "Hill", "Brook", "Fox", "Elm"),
                        ("Farm", "Fields", "Acres", "Orchard"),
                    ),
                ),
                Column("region", CATEGORY, ("choice", ("North", "South", "East", "West", "Central"))),
                Column("hectares", NUMBER, (10, 400), adjective=("large", ">", 250)),
            ),
        ),
        Table(
            "crop",
            len(_CROPS),
            (
                Column("crop_id", ID),
                Column("name", LABEL, ("fixed", tuple(_CROPS))),
                Column("category", CATEGORY, ("by_label", tuple(_CROPS.items()))),
                Column("price_per_kg", NUMBER, (0.2, 3.5, 2), adjective=("cheap", "<", 1), additive=False),
            ),
        ),
        Table(
            "harvest",
            210,
            (
                Column("harvest_id", ID),
                Column("farm_id", FK, (0.1,), references="farm"),
                Column("crop_id", FK, (0.1,), references="crop"),
                Column("harvest_year", NUMBER, (2019, 2024)),
                Column("tonnes", NUMBER, (1, 300), adjective=("big", ">", 200)),
            ),
        ),
    ),
)

DATABASES: tuple[DatabaseSpec, ...] = (LIBRARY, _CLINIC, _BIKE_RENTAL, _MUSIC_SCHOOL, _LOGISTICS_DEPOT, _FARM_COOP)
"""Every world database, in build order."""

HELD_OUT_DB = "farm_coop"
"""The database whose questions appear only in ``dev`` and ``test`` (cross-database generalisation)."""
