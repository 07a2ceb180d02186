//! Paged, sorted listings with a UUID marker, as the Bare Metal API pages every collection.
//!
//! Paging is keyset-based: the next page starts after the marker row in (sort column, id)
//! order, found with a condition on the marker's values rather than an `OFFSET`, so page 100
//! of a 10,000-node listing costs what page 1 does and rows added meanwhile never shift pages.
//! `id` breaks ties, which makes the order total even for non-unique or NULL sort columns.
//!
//! NULLs sort last ascending and first descending on both backends (PostgreSQL's default, so its
//! btree indexes serve the order; SQLite is told explicitly).

use uuid::Uuid;

use crate::sql::SqlBuilder;

/// Sort direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortDir {
    #[default]
    Asc,
    Desc,
}

impl std::str::FromStr for SortDir {
    type Err = UnknownSortDir;

    /// Parses the API's `sort_dir`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "asc" => Ok(Self::Asc),
            "desc" => Ok(Self::Desc),
            other => Err(UnknownSortDir(other.to_owned())),
        }
    }
}

/// A `sort_dir` other than `asc` or `desc`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a sort direction (expected 'asc' or 'desc')")]
pub struct UnknownSortDir(pub String);

/// A `sort_key` the listing does not support (unknown, or a JSON field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' cannot be used to sort this collection")]
pub struct UnknownSortKey(pub String);

/// A column a listing may be sorted by.
pub trait SortKey: Copy {
    /// The column name, a trusted literal (it is pasted into SQL).
    fn column(self) -> &'static str;
    /// Whether the column may be NULL (needs the longer keyset condition).
    fn nullable(self) -> bool;
}

/// Defines a resource's sort-key enum: its variants, their columns, which may be NULL, and
/// `FromStr` from the API's field names. Mark the default with `#[default]`.
macro_rules! define_sort_key {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident => $column:literal $($nullable:ident)? ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $crate::paging::SortKey for $name {
            fn column(self) -> &'static str {
                match self {
                    $( Self::$variant => $column, )+
                }
            }

            fn nullable(self) -> bool {
                match self {
                    $( Self::$variant => define_sort_key!(@nullable $($nullable)?), )+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::paging::UnknownSortKey;

            /// Parses the API's `sort_key` (the field name).
            fn from_str(name: &str) -> Result<Self, Self::Err> {
                match name {
                    $( $column => Ok(Self::$variant), )+
                    other => Err($crate::paging::UnknownSortKey(other.to_owned())),
                }
            }
        }
    };
    (@nullable) => { false };
    (@nullable nullable) => { true };
}

/// Which slice of a listing to return.
#[derive(Debug, Clone, Default)]
pub struct Page<K> {
    /// At most this many records; `None` for all.
    pub limit: Option<u32>,
    /// Start after the record with this UUID (the last one of the previous page).
    pub marker: Option<Uuid>,
    pub sort_key: K,
    pub sort_dir: SortDir,
}

impl<K: Default> Page<K> {
    /// The first `limit` records in the default order.
    pub fn first(limit: u32) -> Self {
        Self {
            limit: Some(limit),
            ..Self::default()
        }
    }

    /// Everything, in the default order.
    pub fn all() -> Self {
        Self::default()
    }
}

impl<K> Page<K> {
    /// The same page shape, continuing after `marker`.
    pub fn after(mut self, marker: Uuid) -> Self {
        self.marker = Some(marker);
        self
    }
}

/// Appends the keyset condition for "after the row with id `marker_id`" to `query`.
pub(crate) fn push_after_marker<K: SortKey>(
    query: &mut SqlBuilder<'_>,
    table: &str,
    key: K,
    dir: SortDir,
    marker_id: i64,
) {
    let column = key.column();
    query.and();
    if column == "id" {
        query
            .push(if dir == SortDir::Asc {
                "id > "
            } else {
                "id < "
            })
            .arg(marker_id);
        return;
    }
    // The marker row's sort value, by subquery: no need to know its type here.
    query.push("(");
    let marker_value = |query: &mut SqlBuilder<'_>| {
        query
            .push("(SELECT ")
            .push(column)
            .push(" FROM ")
            .push(table)
            .push(" WHERE id = ");
        query.arg(marker_id).push(")");
    };
    let (cmp, id_cmp) = if dir == SortDir::Asc {
        (" > ", " > ")
    } else {
        (" < ", " < ")
    };
    // Rows whose value is strictly beyond the marker's, or equal with a later id.
    query.push(column).push(cmp);
    marker_value(query);
    query.push(" OR (").push(column).push(" = ");
    marker_value(query);
    query.push(" AND id").push(id_cmp).arg(marker_id).push(")");
    if key.nullable() {
        match dir {
            // NULLs come last: after a non-NULL marker all of them follow; after a NULL
            // marker only NULLs with a later id do.
            SortDir::Asc => {
                query.push(" OR (").push(column).push(" IS NULL AND (");
                marker_value(query);
                query
                    .push(" IS NOT NULL OR id > ")
                    .arg(marker_id)
                    .push("))");
            }
            // NULLs come first: after a NULL marker, the remaining NULLs (earlier ids) and
            // every non-NULL row follow.
            SortDir::Desc => {
                query.push(" OR (");
                marker_value(query);
                query
                    .push(" IS NULL AND (")
                    .push(column)
                    .push(" IS NOT NULL OR id < ");
                query.arg(marker_id).push("))");
            }
        }
    }
    query.push(")");
}

/// Appends `ORDER BY … LIMIT …`.
pub(crate) fn push_order_and_limit<K: SortKey>(
    query: &mut SqlBuilder<'_>,
    key: K,
    dir: SortDir,
    limit: Option<u32>,
) {
    let column = key.column();
    let (dir_sql, nulls) = match dir {
        SortDir::Asc => (" ASC", " NULLS LAST"),
        SortDir::Desc => (" DESC", " NULLS FIRST"),
    };
    query.push(" ORDER BY ").push(column).push(dir_sql);
    if column != "id" {
        if key.nullable() {
            query.push(nulls);
        }
        query.push(", id").push(dir_sql);
    }
    if let Some(limit) = limit {
        query.push(" LIMIT ").arg(i64::from(limit));
    }
}
