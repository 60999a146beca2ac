//! [`Row`]: one row a write or a hot read got back, its values owned, the same type whichever
//! driver read it (sqlx on PostgreSQL and on pooled SQLite connections, this process's direct
//! SQLite connection, module `direct`), so that the code deciding a write is written once.

use std::sync::Arc;

use sqlx::any::{AnyRow, AnyTypeInfoKind};
use sqlx::{Column as _, Row as _, ValueRef as _};

/// One value of a [`Row`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `NULL`.
    Null,
    /// An integer (booleans are 0 and 1).
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A row: its column names (shared by the rows of one query) and values.
#[derive(Debug, Clone)]
pub struct Row {
    names: Arc<[String]>,
    values: Vec<Value>,
}

/// A column of a [`Row`]: by name (`"version"`) or position (`0`).
pub trait ColumnIndex: Copy + std::fmt::Display {
    /// Its position in `names`.
    fn position(self, names: &[String]) -> Option<usize>;
}

impl ColumnIndex for &str {
    fn position(self, names: &[String]) -> Option<usize> {
        names.iter().position(|n| n == self)
    }
}

impl ColumnIndex for usize {
    fn position(self, names: &[String]) -> Option<usize> {
        (self < names.len()).then_some(self)
    }
}

/// A Rust type a [`Value`] decodes into; the message says what was found instead.
pub trait Field: Sized {
    /// `value` as `Self`.
    fn from_value(value: &Value) -> Result<Self, String>;
}

fn unexpected(expected: &str, found: &Value) -> String {
    let found = match found {
        Value::Null => "NULL",
        Value::Int(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "a blob",
    };
    format!("expected {expected}, found {found}")
}

impl Field for i64 {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Int(i) => Ok(*i),
            other => Err(unexpected("an integer", other)),
        }
    }
}

impl Field for f64 {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            other => Err(unexpected("a number", other)),
        }
    }
}

impl Field for bool {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Int(i) => Ok(*i != 0),
            other => Err(unexpected("a boolean", other)),
        }
    }
}

impl Field for String {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Text(t) => Ok(t.clone()),
            other => Err(unexpected("text", other)),
        }
    }
}

impl<T: Field> Field for Option<T> {
    fn from_value(value: &Value) -> Result<Self, String> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// A decoding failure, as sqlx reports its own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Mismatch(String);

impl Row {
    /// A row of `values` under `names` (one name per value).
    pub fn new(names: Arc<[String]>, values: Vec<Value>) -> Row {
        debug_assert_eq!(names.len(), values.len());
        Row { names, values }
    }

    /// The value of column `index` as `T`: `ColumnNotFound` when there is no such column,
    /// `ColumnDecode` when its value is not a `T` (a row written by hand, a corrupt database).
    pub fn try_get<T: Field, I: ColumnIndex>(&self, index: I) -> Result<T, sqlx::Error> {
        let at = index
            .position(&self.names)
            .ok_or_else(|| sqlx::Error::ColumnNotFound(index.to_string()))?;
        T::from_value(&self.values[at]).map_err(|e| sqlx::Error::ColumnDecode {
            index: format!("{:?}", self.names[at]),
            source: Box::new(Mismatch(e)),
        })
    }

    /// The column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The values, in column order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// `row` (read by sqlx) with its values copied out, by the kind of each value.
    pub fn from_any(row: &AnyRow) -> Result<Row, sqlx::Error> {
        let names: Arc<[String]> = row.columns().iter().map(|c| c.name().to_string()).collect();
        Row::from_any_with(row, names)
    }

    /// As [`Row::from_any`], with the column names of an earlier row of the same query.
    pub fn from_any_with(row: &AnyRow, names: Arc<[String]>) -> Result<Row, sqlx::Error> {
        let mut values = Vec::with_capacity(names.len());
        for i in 0..row.columns().len() {
            let raw = row.try_get_raw(i)?;
            let value = if raw.is_null() {
                Value::Null
            } else {
                match raw.type_info().kind() {
                    AnyTypeInfoKind::Null => Value::Null,
                    AnyTypeInfoKind::Bool => Value::Int(row.try_get::<bool, _>(i)? as i64),
                    AnyTypeInfoKind::SmallInt
                    | AnyTypeInfoKind::Integer
                    | AnyTypeInfoKind::BigInt => Value::Int(row.try_get::<i64, _>(i)?),
                    AnyTypeInfoKind::Real | AnyTypeInfoKind::Double => {
                        Value::Real(row.try_get::<f64, _>(i)?)
                    }
                    AnyTypeInfoKind::Text => Value::Text(row.try_get::<String, _>(i)?),
                    AnyTypeInfoKind::Blob => Value::Blob(row.try_get::<Vec<u8>, _>(i)?),
                }
            };
            values.push(value);
        }
        Ok(Row { names, values })
    }

    /// Every row of `rows` (one query's), the column names shared.
    pub fn from_any_rows(rows: &[AnyRow]) -> Result<Vec<Row>, sqlx::Error> {
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let names: Arc<[String]> = first
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        rows.iter()
            .map(|r| Row::from_any_with(r, names.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row::new(
            vec!["n".to_string(), "t".to_string(), "z".to_string()].into(),
            vec![Value::Int(7), Value::Text("x".into()), Value::Null],
        )
    }

    #[test]
    fn values_decode_by_name_and_position() {
        let r = row();
        assert_eq!(r.try_get::<i64, _>("n").unwrap(), 7);
        assert_eq!(r.try_get::<String, _>(1).unwrap(), "x");
        assert_eq!(r.try_get::<Option<String>, _>("z").unwrap(), None);
        assert_eq!(r.try_get::<Option<i64>, _>("n").unwrap(), Some(7));
        assert!(r.try_get::<bool, _>("n").unwrap());
    }

    #[test]
    fn a_missing_column_or_a_wrong_type_is_an_error_naming_it() {
        let r = row();
        match r.try_get::<i64, _>("nope") {
            Err(sqlx::Error::ColumnNotFound(c)) => assert_eq!(c, "nope"),
            other => panic!("{other:?}"),
        }
        let e = r.try_get::<i64, _>("t").unwrap_err();
        assert!(matches!(e, sqlx::Error::ColumnDecode { .. }), "{e:?}");
        assert!(
            e.to_string().contains("expected an integer, found text"),
            "{e}"
        );
        assert!(r.try_get::<String, _>("z").is_err());
    }
}
