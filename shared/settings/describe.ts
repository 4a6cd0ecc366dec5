/**
 * A settings table told to people: the Markdown table docs/settings.md holds (written by
 * scripts/generate-settings-docs.ts) and the list `gantry-agent --help` prints. Both come
 * from the table the process parses with, so neither can drift from the code.
 */
import {
  plainText,
  type SettingEntry,
  type SettingsTable,
  settingsIn,
  shownDefault,
} from "./index.ts";

/** "required" when the setting has no default and cannot be left unset; else its default. */
export function defaultText(entry: SettingEntry): string {
  if (entry.info.shownDefault === undefined && !entry.schema.safeParse(undefined).success) {
    return "required";
  }
  return shownDefault(entry);
}

/** One row per setting: variable (and flag, if any setting has one), default, what. */
export function settingsMarkdown(table: SettingsTable): string {
  const entries = settingsIn(table);
  const flags = entries.some((entry) => entry.info.flag !== undefined);
  const cell = (value: string) => value.replaceAll("|", "\\|");
  const header = flags
    ? ["| Variable | Flag | Default | What |", "| --- | --- | --- | --- |"]
    : ["| Variable | Default | What |", "| --- | --- | --- |"];
  const rows = entries.map((entry) => {
    const { env, flag, description } = entry.info;
    const columns = [
      `\`${env}\``,
      ...(flags ? [flag ? `\`${flag}\`` : ""] : []),
      defaultText(entry),
      description,
    ];
    return `| ${columns.map(cell).join(" | ")} |`;
  });
  return [...header, ...rows].join("\n");
}

/** For a terminal: each setting, its flag and default, then what it is for, wrapped. */
export function settingsHelp(table: SettingsTable, width = 80): string {
  return settingsIn(table)
    .map((entry) => {
      const { env, flag, description } = entry.info;
      const names = flag ? `${env}, ${flag}` : env;
      const lines = wrap(plainText(description), width - 6).map((line) => `      ${line}`);
      return [`  ${names} (${plainText(defaultText(entry))})`, ...lines].join("\n");
    })
    .join("\n")
    .concat("\n");
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/)) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}
