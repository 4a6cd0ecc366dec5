import type pg from "pg";

/**
 * Settings every connection of a pool carries, changed while the pool runs (the jobs
 * triggers' `gantry.announce`, migration 0029). A connection takes the current values when
 * the pool next hands it out: before the borrower's first statement, so outside any
 * transaction, where no rollback can undo them.
 */
export class SessionSettings {
  private readonly values = new Map<string, string>();
  private version = 0;
  /** The version each connection last took. */
  private readonly taken = new WeakMap<pg.PoolClient, number>();

  /** From the next time each connection is handed out. */
  set(name: string, value: string): void {
    if (this.values.get(name) === value) return;
    this.values.set(name, value);
    this.version++;
  }

  get(name: string): string | undefined {
    return this.values.get(name);
  }

  /** Gives `pool`'s connections the settings as they are handed out. */
  attach(pool: pg.Pool): void {
    pool.on("acquire", (client) => this.bring(client));
  }

  private bring(client: pg.PoolClient): void {
    const version = this.version;
    if (this.values.size === 0 || this.taken.get(client) === version) return;
    // Not awaited: pg runs one client's statements in the order they were given, so this
    // one goes ahead of whatever the borrower sends. A failure (the connection dropping)
    // leaves the version untaken, and the next hand-out tries again.
    client
      .query(
        "SELECT set_config(name, value, false) FROM unnest($1::text[], $2::text[]) AS s(name, value)",
        [[...this.values.keys()], [...this.values.values()]],
      )
      .then(
        () => this.taken.set(client, version),
        () => {},
      );
  }
}
