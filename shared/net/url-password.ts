/**
 * A URL as a line may show it: its password replaced by `***` (`amqp://gantry:***@host`),
 * and on nats:// a lone token before the `@` too (`nats://***@host`), since NATS takes a
 * token there. Anything that is not such a URL comes back as it was.
 */
export function withoutPassword(value: string): string {
  return value.replace(
    /^([a-z][a-z0-9+.-]*):\/\/([^/?#@]*)@/i,
    (_, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(":");
      if (colon >= 0) return `${scheme}://${userinfo.slice(0, colon)}:***@`;
      return scheme.toLowerCase() === "nats" ? `${scheme}://***@` : `${scheme}://${userinfo}@`;
    },
  );
}
