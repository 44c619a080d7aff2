// Saved views of the jobs table: named sets of its filters, sort and grouping. They are kept in this
// browser's localStorage under the signed-in user (tenant and user of the token), never on the gateway;
// the address (#/jobs?...) carries the same state, so a view can also be shared as a link.

const PREFIX = "muster.views.v1:";
/** The parameters of the jobs table a view keeps (the page it was on is not part of it). */
const KEPT = ["tenant", "queue", "state", "priority_class", "cluster", "user", "text", "sort", "descending", "group",
  "limit"];
export const MAX_NAME = 60;

export function viewKey(who) {
  return `${PREFIX}${who.tenant}/${who.user}`;
}

/** The view's part of ``params``, in a canonical order (equal views give equal strings). */
export function viewQuery(params) {
  const kept = new URLSearchParams();
  for (const name of KEPT) {
    const value = params.get(name);
    if (value !== null && value !== "") kept.set(name, value);
  }
  kept.sort();
  return kept.toString();
}

export function loadViews(who) {
  try {
    const stored = JSON.parse(localStorage.getItem(viewKey(who)) || "[]");
    return Array.isArray(stored)
      ? stored.filter((v) => v && typeof v.name === "string" && typeof v.query === "string") : [];
  } catch {
    return [];
  }
}

function store(who, views) {
  try {
    localStorage.setItem(viewKey(who), JSON.stringify(views));
  } catch {
    // storage full or disabled: the views last until the page is closed
  }
  return views;
}

/** Save ``params`` as ``name`` (replacing a view of that name); the views, by name. */
export function saveView(who, name, params) {
  const views = loadViews(who).filter((v) => v.name !== name);
  views.push({ name: name.slice(0, MAX_NAME), query: viewQuery(params) });
  views.sort((a, b) => a.name.localeCompare(b.name));
  return store(who, views);
}

export function deleteView(who, name) {
  return store(who, loadViews(who).filter((v) => v.name !== name));
}
