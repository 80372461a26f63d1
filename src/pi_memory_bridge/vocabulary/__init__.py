"""Words every room shares and none owns: how a command talks to the user (`dialog`: `Dialog`,
`Flow`, `Outcome`) and what the status report holds (`status`: `StatusReport`, `Problem`)."""
