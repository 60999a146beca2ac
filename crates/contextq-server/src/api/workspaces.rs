//! The workspace endpoints (`/api/workspaces`): list, create, archive, delete.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use contextq_api::Scope;
use contextq_api::bodies::{CreateWorkspace, WorkspaceList};

use crate::store::workspaces;

use super::extract::{Admin, JsonBody};
use super::{ApiError, AppState, Caller};

pub(super) async fn list_workspaces(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<WorkspaceList>, ApiError> {
    caller.require(Scope::Read)?;
    let mut list = workspaces::list(&s.db, &caller.tenant_id).await?;
    list.retain(|w| caller.reaches(&w.slug));
    Ok(Json(WorkspaceList {
        workspaces: list,
        limited_to: caller.workspaces.clone(),
    }))
}

pub(super) async fn create_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    JsonBody(body, _room): JsonBody<CreateWorkspace>,
) -> Result<Response, ApiError> {
    caller.write_in(&body.slug)?;
    let ws = workspaces::create(&s.db, caller.actor(), &body.slug, &body.name).await?;
    Ok((StatusCode::CREATED, Json(ws)).into_response())
}

pub(super) async fn archive_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    caller.write_in(&slug)?;
    Ok(Json(workspaces::archive(&s.db, caller.actor(), &slug).await?).into_response())
}

pub(super) async fn delete_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    caller.write_in(&slug)?;
    workspaces::delete(&s.db, caller.actor(), &slug).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
