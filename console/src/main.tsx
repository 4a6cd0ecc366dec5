import "uplot/dist/uPlot.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useMemo, useState } from "preact/hooks";
import { ConsoleApi } from "./api.ts";
import { errorText } from "./format.ts";
import { LiveFeed } from "./live.ts";
import { hrefOf, onLinkClick, type Route, useRoute } from "./router.ts";
import type { Session } from "./session.ts";
import { AdminView } from "./views/admin.tsx";
import { JobView } from "./views/job.tsx";
import { JobsView } from "./views/jobs.tsx";
import { OverviewView } from "./views/overview.tsx";
import { TryView } from "./views/try-it.tsx";

/** The key lives in this tab's session storage only: never in a URL, gone with the tab. */
const KEY_STORAGE = "gantry.apiKey";

function KeyForm(props: { onKey: (key: string) => void; error: string | null }) {
  const [key, setKey] = useState("");
  return (
    <form
      class="key-form"
      onSubmit={(event) => {
        event.preventDefault();
        if (key.trim()) props.onKey(key.trim());
      }}
    >
      <h1>Gantry console</h1>
      <label>
        API key
        <input
          type="password"
          autocomplete="off"
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
      </label>
      <button type="submit">Sign in</button>
      {props.error && <p role="alert">{props.error}</p>}
      <p class="hint">
        The key stays in this tab (session storage) and is sent only to this gateway.
      </p>
    </form>
  );
}

const NAV: [label: string, route: Route, adminOnly: boolean][] = [
  ["Overview", { view: "overview" }, false],
  ["Jobs", { view: "jobs" }, false],
  ["Try it", { view: "try" }, false],
  ["Admin", { view: "admin" }, true],
];

function Shell(props: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const { session } = props;
  const current = route.view === "job" ? "jobs" : route.view;
  useEffect(() => {
    document.addEventListener("click", onLinkClick);
    return () => document.removeEventListener("click", onLinkClick);
  }, []);
  return (
    <div class="shell">
      <header>
        <strong>Gantry</strong>
        <nav aria-label="Views">
          {NAV.filter(([, , adminOnly]) => !adminOnly || session.admin).map(([label, r]) => (
            <a key={label} href={hrefOf(r)} aria-current={r.view === current ? "page" : undefined}>
              {label}
            </a>
          ))}
          <a href="/docs">API reference</a>
        </nav>
        <button type="button" class="link" onClick={props.onSignOut}>
          Sign out
        </button>
      </header>
      <main>
        {route.view === "overview" && <OverviewView session={session} />}
        {route.view === "jobs" && <JobsView session={session} />}
        {route.view === "job" && <JobView session={session} id={route.id} />}
        {route.view === "try" && <TryView session={session} />}
        {route.view === "admin" &&
          (session.admin ? (
            <AdminView session={session} />
          ) : (
            <p role="alert">This key has no admin scope.</p>
          ))}
      </main>
    </div>
  );
}

function App() {
  const [key, setKey] = useState(() => sessionStorage.getItem(KEY_STORAGE));
  const [session, setSession] = useState<Session | null>(null);
  const [error, setError] = useState<string | null>(null);
  const api = useMemo(() => (key ? new ConsoleApi(key) : null), [key]);

  useEffect(() => {
    if (!api) return;
    let feed: LiveFeed | null = null;
    let canceled = false;
    // A models call checks the key (401 otherwise); the admin probe decides the views.
    Promise.all([api.sdk.models.list(), api.isAdmin()])
      .then(([, admin]) => {
        if (canceled) return;
        feed = new LiveFeed(api);
        setSession({ api, feed, admin });
      })
      .catch((failure) => {
        if (canceled) return;
        sessionStorage.removeItem(KEY_STORAGE);
        setKey(null);
        setError(errorText(failure));
      });
    return () => {
      canceled = true;
      feed?.close();
      setSession(null);
    };
  }, [api]);

  if (!key)
    return (
      <KeyForm
        error={error}
        onKey={(value) => {
          sessionStorage.setItem(KEY_STORAGE, value);
          setError(null);
          setKey(value);
        }}
      />
    );
  if (!session) return <p class="loading">Connecting…</p>;
  return (
    <Shell
      session={session}
      onSignOut={() => {
        sessionStorage.removeItem(KEY_STORAGE);
        setKey(null);
      }}
    />
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
