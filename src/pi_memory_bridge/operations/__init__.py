"""What Pi's commands, the terminal and the memory inspector all do to memory, without asking
anyone: find and delete (`forget`), view, edit, export and import memory, pause a project, read
the global config file. The dialogs around them are in `commands`."""
