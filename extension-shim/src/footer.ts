/** The two footers the shim shows on its own, when the sidecar cannot answer: rendered from the
 * sidecar's templates (src/generated/tables.ts), so every footer text has one source. */
import { FOOTER_TEMPLATES } from "./generated/tables.ts";
import type { Footer } from "./protocol.ts";

const MAX_REASON_CHARS = 120;

export const STARTING: Footer = { state: "starting", text: FOOTER_TEMPLATES.starting };

export function unavailable(reason: string): Footer {
	let short = reason.split(/\s+/).filter(Boolean).join(" ");
	if (short.length > MAX_REASON_CHARS) short = `${short.slice(0, MAX_REASON_CHARS - 1)}…`;
	return { state: "unavailable", reason: short, text: FOOTER_TEMPLATES.unavailable.replace("{reason}", short) };
}

/** A `status/changed` notification's footer, or undefined when it is not one. */
export function footerOf(params: unknown): Footer | undefined {
	const footer = (params as { footer?: unknown } | null)?.footer as Partial<Footer> | undefined;
	if (!footer || typeof footer.text !== "string" || typeof footer.state !== "string") return undefined;
	if (!Object.hasOwn(FOOTER_TEMPLATES, footer.state)) return undefined;
	return footer as Footer;
}
